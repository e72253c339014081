"""No client text reaches the database unchecked: a NUL (which PostgreSQL refuses) in each
kind of input, on every API operation and every page, is a 400 that says where, in JSON
`{detail, code}` on the API; never a 5xx. Routes come from the resolver and the OpenAPI
schema (tests/support/routes.py), so a new one is walked the day it is added."""

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from core.client_text import text_check
from tests.support.files import make_pdf
from tests.support.routes import api_operations, generic_value, url_routes
from tests.support.world import world

pytestmark = pytest.mark.django_db

NUL = "a\x00b"
REFUSED = "invalid_characters"


@pytest.fixture
def mine(org, settings):
    settings.PAPERLANE_ONEDRIVE_CLIENT_ID = "walk-client-id"
    settings.PAPERLANE_ONEDRIVE_CLIENT_SECRET = "walk-secret"
    return world(org)


def _json_error(response) -> dict:
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    body = response.json()
    assert body["detail"] and body["code"], body
    return body


def test_search_with_a_nul_is_a_400_in_json_not_a_500(api):
    response = api.get("/api/v1/search?q=abc%00def")

    assert response.status_code == 400
    body = _json_error(response)
    assert body["code"] == REFUSED
    assert body["detail"] == (
        "The query parameter 'q' holds a NUL character (U+0000), which cannot be accepted."
    )


def test_every_api_operation_refuses_a_nul_in_each_kind_of_input(mine):
    client = mine.api
    for operation in api_operations():
        url = operation.url(mine.values())
        where = f"{operation.method} {operation.path}"
        names = operation.query_params or ("q",)
        query = "&".join(f"{name}=a%00b" for name in names)
        tried = {
            "query": client.generic(operation.method, f"{url}?{query}"),
            "header": client.generic(operation.method, url, headers={"Idempotency-Key": NUL}),
            "header name": client.generic(operation.method, url, headers={"X-Note": NUL}),
        }
        for kind, response in tried.items():
            assert response.status_code == 400, (where, kind, response.status_code)
            assert _json_error(response)["code"] == REFUSED, (where, kind)
        path_nul = re.sub(r"\{\w+\}", "a%00b", operation.path)
        if path_nul != operation.path:
            response = client.generic(operation.method, path_nul)
            assert response.status_code == 400 and _json_error(response)["code"] == REFUSED
        if operation.method in ("POST", "PUT", "PATCH"):
            fields = operation.body_fields or ("note",)
            body = "{" + ", ".join(f'"{name}": "a\\u0000b"' for name in fields) + "}"
            response = client.generic(operation.method, url, body, content_type="application/json")
            assert response.status_code < 500, (where, "json", response.status_code)
            if operation.body == "json":
                assert _json_error(response)["code"] == REFUSED, (where, "json")
            form = {"note": NUL, "file": SimpleUploadedFile(f"{NUL}.pdf", make_pdf(1))}
            response = client.post(url, form)
            assert response.status_code < 500, (where, "multipart", response.status_code)
            if operation.body == "multipart":
                assert _json_error(response)["code"] == REFUSED, (where, "multipart")
            surrogate = '{"filename": "a\\ud800b.pdf", "size_bytes": 10}'
            response = client.generic(
                operation.method, url, surrogate, content_type="application/json"
            )
            assert response.status_code < 500, (where, "surrogate", response.status_code)


def _forms(html: str) -> list[tuple[str, list[str]]]:
    """(action, names of its text fields) of each form of a page."""
    found = []
    for attributes, inner in re.findall(r"<form([^>]*)>(.*?)</form>", html, re.S):
        action = re.search(r'action="([^"]*)"', attributes)
        names = re.findall(r'<(?:input|select|textarea)[^>]*name="([^"]+)"', inner)
        found.append((action.group(1) if action else "", names))
    return found


def test_every_page_and_its_forms_refuse_a_nul_with_a_page(mine, member_client, operator):
    # django-rq's pages need queues that exist.
    values = {**mine.values(), "queue_index": "0"}
    walked_forms = 0
    for route in url_routes():
        # The API's (its 404 for an address it does not have answers as the API does: its
        # multipart fields are the API parser's to check, for an operation that reads them).
        if route.namespace == "api" or route.full_name == "api_not_found":
            continue
        url = route.fill(lambda param: values.get(param.name) or generic_value(param))
        client = operator if url.startswith(("/admin/", "/metrics")) else member_client
        for response in (
            client.get(f"{url}?q=a%00b"),
            client.get(url, headers={"X-Note": NUL}),
            client.post(url, {"note": NUL}),
        ):
            assert response.status_code == 400, (route.full_name, url, response.status_code)
            if url.startswith("/metrics"):
                continue
            assert "NUL character" in response.content.decode(), (route.full_name, url)
        if any(param.name not in values for param in route.params):
            continue  # a value that names nothing: no page, and no form on it, to fill in
        page = client.get(url)
        if page.status_code != 200 or not page["Content-Type"].startswith("text/html"):
            continue
        for action, names in _forms(page.content.decode()):
            data = {name: NUL for name in names if name != "csrfmiddlewaretoken"}
            if not data:
                continue
            response = client.post(action or url, data)
            assert response.status_code == 400, (route.full_name, action, response.status_code)
            assert "cannot be accepted" in response.content.decode()
            walked_forms += 1
    assert walked_forms >= 5


def test_a_session_cookie_with_a_nul_is_refused_before_the_session_is_read(mine):
    client = Client(headers={"Cookie": "sessionid=abc\x00def"})

    response = client.get("/")

    assert response.status_code == 400


def test_tab_line_feed_and_emoji_are_accepted():
    text_check("field", "a\tb\nc\r\nd 😀 ü")
