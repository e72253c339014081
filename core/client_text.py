"""Text from clients is checked once, before any view, service or query sees it.

PostgreSQL refuses a NUL in text, and UTF-8 cannot carry a lone surrogate (JSON's
`"\\ud800"` makes one): either would reach the database as a 500. Other control
characters (all of C0 but tab, line feed and carriage return) are refused too: nothing
a person or an integration sends here needs them, and a name or a log line holding one
misleads whoever reads it. Such a request gets a 400 that says where the character was:
`{detail, code: "invalid_characters"}` on the API, a page elsewhere.

`ClientTextMiddleware` checks the path, the query string, every header and form fields;
the API's JSON bodies and multipart fields are checked by its parser (`api/parser.py`),
after the token is known: a multipart body is read only for a caller who may upload.
"""

import re
from collections.abc import Iterable

from django.http import HttpRequest, JsonResponse, QueryDict
from django.shortcuts import render

from core.errors import ServiceError
from core.http import is_api_request

REFUSED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]")
REFUSED_TEMPLATE = "client_text_refused.html"


class RefusedCharacter(ServiceError):
    status_code = 400
    code = "invalid_characters"


def _describe(character: str) -> str:
    point = ord(character)
    if point == 0:
        return "a NUL character (U+0000)"
    if 0xD800 <= point <= 0xDFFF:
        return f"a lone surrogate (U+{point:04X})"
    return f"a control character (U+{point:04X})"


def text_check(where: str, text: str) -> None:
    """Raise RefusedCharacter if `text` (found at `where`) holds a refused character."""
    if found := REFUSED.search(text):
        raise RefusedCharacter(
            f"The {where} holds {_describe(found.group())}, which cannot be accepted."
        )


def _name(name: str) -> str:
    # The name is shown in the refusal; it may itself hold what is refused.
    return REFUSED.sub("?", name)[:100]


def pairs_check(kind: str, pairs: Iterable[tuple[str, str]]) -> None:
    for key, value in pairs:
        text_check(f"name of {kind} '{_name(key)}'", key)
        text_check(f"{kind} '{_name(key)}'", value)


def querydict_check(kind: str, data: QueryDict) -> None:
    pairs_check(kind, ((key, value) for key, values in data.lists() for value in values))


def json_check(value, where: str = "field") -> None:
    """Every string in a parsed JSON document, its keys included."""
    if isinstance(value, str):
        text_check(where, value)
    elif isinstance(value, dict):
        for key, item in value.items():
            text_check(f"name of field '{_name(key)}'", key)
            json_check(item, f"field '{_name(key)}'")
    elif isinstance(value, list):
        for item in value:
            json_check(item, where)


def headers_check(request: HttpRequest) -> None:
    meta = request.META
    headers = (
        (key[5:].replace("_", "-").title(), value)
        for key, value in meta.items()
        if key.startswith("HTTP_") and isinstance(value, str)
    )
    pairs_check("header", headers)
    text_check("header 'Content-Type'", meta.get("CONTENT_TYPE", "") or "")


def _form_body(request: HttpRequest) -> bool:
    content_type = request.META.get("CONTENT_TYPE", "")
    if content_type.startswith("application/x-www-form-urlencoded"):
        return True
    # Outside the API the person is known by now (the session): a file is read for a
    # signed-in person only (the API's parser reads its own once the token is known).
    user = getattr(request, "user", None)
    return (
        content_type.startswith("multipart/form-data")
        and not is_api_request(request)
        and user is not None
        and user.is_authenticated
    )


def request_check(request: HttpRequest) -> None:
    text_check("address", request.path)
    headers_check(request)
    querydict_check("query parameter", request.GET)
    if request.method == "POST" and _form_body(request):
        querydict_check("form field", request.POST)


def refused_response(request: HttpRequest, error: RefusedCharacter):
    if is_api_request(request):
        return JsonResponse(error.as_dict(), status=error.status_code)
    return render(request, REFUSED_TEMPLATE, {"error": error}, status=error.status_code)


class ClientTextMiddleware:
    """After authentication (a page's upload is read for a signed-in person only)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest):
        try:
            request_check(request)
        except RefusedCharacter as error:
            return refused_response(request, error)
        return self.get_response(request)
