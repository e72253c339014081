"""The error codes the code base writes, found in its source: what the API's ErrorCode
must name, and what the pipeline's lists of codes may name."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ("config", "web", "api", "operations", "connectors", "webhooks", "pipeline", "retrieval")
APPS += ("documents", "formats", "core")
# What runs in a worker: the apps whose errors a run can end with.
PIPELINE_APPS = ("connectors", "pipeline", "retrieval", "documents", "formats", "core")
# The positional argument that is the code, in the two calls that take it so:
# config/api.py's _error(request, status, detail, code) and the engine's
# _fail(claim, exc, outcome, code, message).
CODE_ARGUMENT = {"_error": 3, "_fail": 3}


def _is_code(value: object) -> bool:
    return isinstance(value, str) and re.fullmatch(r"[a-z][a-z0-9_]*", value) is not None


def _sources(apps: tuple[str, ...]):
    for app in apps:
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" not in path.parts:
                yield str(path.relative_to(ROOT)), ast.parse(path.read_text())


def codes_in_source(apps: tuple[str, ...] = APPS) -> dict[str, str]:
    """Every error code the code of `apps` writes, with a file that writes it: `code="…"`,
    `code = "…"`, `x["code"] = "…"` and `{"code": "…"}` (also `error_code`), the code
    argument of `_error` and `_fail`, the values of config/api.py's `_HTTP_CODES` and the
    extraction limits' codes; a name in any of those places stands for the string a
    module-level constant of that name holds."""
    trees = list(_sources(apps))
    constants = {
        target.id: node.value.value
        for _, tree in trees
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for target in node.targets
        if isinstance(target, ast.Name) and _is_code(node.value.value)
    }
    found: dict[str, str] = {}
    for where, tree in trees:
        for node in ast.walk(tree):
            for value in _code_values(node, constants):
                found.setdefault(value, where)
    return found


NAMES = {"code", "error_code"}


def _code_values(node: ast.AST, constants: dict[str, str]):
    def values(expression: ast.AST):
        yield from _constants(expression, constants)

    if isinstance(node, ast.keyword) and node.arg in NAMES:
        yield from values(node.value)
    elif isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values, strict=True):
            if isinstance(key, ast.Constant) and key.value in NAMES:
                yield from values(value)
    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            if isinstance(target, ast.Name) and target.id in NAMES:
                yield from values(node.value)
            elif isinstance(target, ast.Subscript) and (
                isinstance(target.slice, ast.Constant) and target.slice.value in NAMES
            ):
                yield from values(node.value)
            elif isinstance(target, ast.Name) and target.id == "_HTTP_CODES":
                yield from (value.value for value in node.value.values)
    elif isinstance(node, ast.Call):
        name = getattr(node.func, "id", getattr(node.func, "attr", None))
        index = CODE_ARGUMENT.get(name)
        if index is not None and len(node.args) > index:
            yield from values(node.args[index])
    elif isinstance(node, ast.JoinedStr) and ast.unparse(node) == "f'extract_{exc.limit}_limit'":
        yield from (f"extract_{limit}_limit" for limit in ("memory", "time", "cpu"))


def _constants(node: ast.AST, constants: dict[str, str]):
    if isinstance(node, ast.Constant) and _is_code(node.value):
        yield node.value
    elif isinstance(node, ast.Name) and node.id in constants:
        yield constants[node.id]
    elif isinstance(node, ast.BoolOp):
        for value in node.values:
            yield from _constants(value, constants)
