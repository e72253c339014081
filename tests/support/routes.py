"""Every route the site answers, enumerated from the URL resolver and the API's OpenAPI
schema, so that a walk over them covers a route the day it is added.

- `url_routes()`: every URL pattern, recursively, with the path it matches once its
  parameters are filled in by `fill`.
- `api_operations()`: every operation of the one NinjaAPI (method, path, parameters,
  body), from its OpenAPI schema.
"""

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.urls.resolvers import RegexPattern, RoutePattern

from config.api import api

# `<uuid:run_id>` in a path() route.
_ROUTE_PARAM = re.compile(r"<(?:(?P<converter>[^>:]+):)?(?P<name>[^>]+)>")
# `(?P<app_label>auth|documents)` in a re_path() regex, optional or not.
_REGEX_PARAM = re.compile(r"\(\?P<(?P<name>\w+)>(?P<body>(?:[^()]|\([^()]*\))*)\)\??")


@dataclass(frozen=True)
class Param:
    name: str
    # int, uuid, str, path, or "regex" (the group of a regular expression, `group`).
    kind: str
    group: str = ""


@dataclass
class Route:
    """One URL pattern: its full pattern text, namespace, name and parameters."""

    pattern: str
    namespace: str | None
    name: str | None
    params: list[Param] = field(default_factory=list)
    # (kind, text) pieces in order: ("text", "runs/") or ("param", "run_id").
    pieces: list[tuple[str, str]] = field(default_factory=list)

    @property
    def full_name(self) -> str:
        name = self.name or f"<unnamed {self.pattern}>"
        return f"{self.namespace}:{name}" if self.namespace else name

    def fill(self, value: Callable[[Param], str]) -> str:
        """The path this pattern matches with each parameter given `value(param)`."""
        params = {p.name: p for p in self.params}
        parts = [text if kind == "text" else value(params[text]) for kind, text in self.pieces]
        path = "/" + "".join(parts)
        assert resolve(path).route == self.pattern, f"{path} is not answered by {self.pattern}"
        return path


def _regex_pieces(text: str) -> tuple[list[tuple[str, str]], list[Param]]:
    pieces, params, at = [], [], 0
    for match in _REGEX_PARAM.finditer(text):
        pieces.append(("text", text[at : match.start()]))
        pieces.append(("param", match["name"]))
        params.append(Param(match["name"], "regex", match["body"]))
        at = match.end()
    pieces.append(("text", text[at:]))
    cleaned = []
    for kind, piece in pieces:
        if kind == "text":
            piece = piece.lstrip("^").rstrip("$").replace("/?", "/").replace("\\.", ".")
            assert not set(piece) & set("()[]{}*+?|\\"), (
                f"tests/support/routes.py cannot build a path for the regex {text!r}: teach it"
            )
        cleaned.append((kind, piece))
    return cleaned, params


def _route_pieces(text: str) -> tuple[list[tuple[str, str]], list[Param]]:
    pieces, params, at = [], [], 0
    for match in _ROUTE_PARAM.finditer(text):
        pieces.append(("text", text[at : match.start()]))
        pieces.append(("param", match["name"]))
        params.append(Param(match["name"], match["converter"] or "str"))
        at = match.end()
    pieces.append(("text", text[at:]))
    return pieces, params


def _pieces(pattern) -> tuple[list[tuple[str, str]], list[Param]]:
    if isinstance(pattern, RoutePattern):
        return _route_pieces(str(pattern))
    assert isinstance(pattern, RegexPattern), pattern
    return _regex_pieces(str(pattern))


def url_routes() -> list[Route]:
    routes: list[Route] = []

    def walk(patterns, prefix_pieces, prefix_params, prefix_text, namespace):
        for entry in patterns:
            pieces, params = _pieces(entry.pattern)
            # As Django joins them (ResolverMatch.route): a nested regex loses its "^".
            text = prefix_text + str(entry.pattern).removeprefix("^")
            if isinstance(entry, URLResolver):
                walk(
                    entry.url_patterns,
                    prefix_pieces + pieces,
                    prefix_params + params,
                    text,
                    entry.namespace or namespace,
                )
            else:
                assert isinstance(entry, URLPattern)
                routes.append(
                    Route(
                        pattern=text,
                        namespace=namespace,
                        name=entry.name,
                        params=prefix_params + params,
                        pieces=prefix_pieces + pieces,
                    )
                )

    walk(get_resolver().url_patterns, [], [], "", None)
    return routes


@dataclass(frozen=True)
class Operation:
    method: str
    # As OpenAPI writes it: /api/v1/runs/{run_id}
    path: str
    operation_id: str
    path_params: tuple[str, ...]
    query_params: tuple[str, ...]
    header_params: tuple[str, ...]
    # "json", "multipart" or None, with the body's string fields.
    body: str | None
    body_fields: tuple[str, ...]

    def url(self, values: dict[str, str]) -> str:
        return re.sub(r"\{(\w+)\}", lambda m: values[m[1]], self.path)


def _schema_fields(schema: dict, components: dict) -> tuple[str, ...]:
    if "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[-1]]
    return tuple(schema.get("properties", {}))


def api_operations() -> list[Operation]:
    schema = api.get_openapi_schema()
    components = schema.get("components", {}).get("schemas", {})
    operations = []
    for path, methods in schema["paths"].items():
        for method, spec in methods.items():
            parameters = spec.get("parameters", [])
            by_place = {
                place: tuple(p["name"] for p in parameters if p["in"] == place)
                for place in ("path", "query", "header")
            }
            content = spec.get("requestBody", {}).get("content", {})
            body, fields = None, ()
            if "application/json" in content:
                body = "json"
                fields = _schema_fields(content["application/json"]["schema"], components)
            elif "multipart/form-data" in content:
                body = "multipart"
                fields = _schema_fields(content["multipart/form-data"]["schema"], components)
            operations.append(
                Operation(
                    method=method.upper(),
                    path=path,
                    operation_id=spec["operationId"],
                    path_params=by_place["path"],
                    query_params=by_place["query"],
                    header_params=by_place["header"],
                    body=body,
                    body_fields=fields,
                )
            )
    return operations


def generic_value(param: Param) -> str:
    """A value of the parameter's type that names nothing in particular."""
    if param.kind == "int":
        return "987654321"
    if param.kind == "uuid":
        return str(uuid.uuid4())
    if param.kind == "regex":
        # The first of these the group takes; its alternatives (auth|documents|...) last.
        for candidate in ("nothinghere", "nothing-here", *param.group.split("|")):
            if re.fullmatch(param.group, candidate):
                return candidate
        raise AssertionError(f"no value for the group {param.name} ({param.group}): teach it")
    return "nothing-here"
