"""Every API error is JSON `{"detail", "code"}` with the status that says why."""

import json

import pytest
from django.db import connection
from django.test import Client

from config.errors import server_error

pytestmark = pytest.mark.django_db


def test_a_missing_or_wrong_token_is_a_401_saying_what_to_send(api):
    for client in (Client(), Client(headers={"Authorization": "Bearer pl_not-a-token"})):
        response = client.get("/api/v1/quota")

        assert response.status_code == 401
        assert response.json()["code"] == "unauthorized"
        assert "Bearer" in response.json()["detail"] and response["WWW-Authenticate"] == "Bearer"


def test_a_malformed_parameter_is_a_422_naming_the_field(api):
    response = api.get("/api/v1/runs/not-a-uuid")

    assert response.status_code == 422
    body = response.json()
    assert body["code"] == "invalid_request" and "run_id" in body["detail"]
    assert body["errors"][0]["loc"][-1] == "run_id"


def test_a_multipart_body_without_its_boundary_is_a_400_in_json(api):
    response = api.post(
        "/api/v1/documents", b"--x\r\n\r\nnot a form", content_type="multipart/form-data"
    )

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_multipart"


def test_a_json_body_that_does_not_parse_is_a_400_in_json(api):
    response = api.post("/api/v1/uploads", "name=ci", content_type="application/json")

    assert response.status_code == 400
    assert response.json()["code"] == "bad_request" and response.json()["detail"]


def test_a_failure_of_ours_is_a_json_500_logged_with_its_traceback(api, caplog):
    # A real failure of PostgreSQL under a request: the table the token is read with is gone
    # (rolled back with the test's transaction).
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE documents_apitoken RENAME TO documents_apitoken_gone")

    response = api.get("/api/v1/quota")

    assert response.status_code == 500
    assert response["Content-Type"].startswith("application/json")
    assert response.json() == {
        "detail": "Something went wrong on our side; it has been logged.",
        "code": "internal_error",
    }
    [record] = [r for r in caplog.records if r.exc_info]
    assert record.getMessage() == "Internal Server Error: /api/v1/quota"
    assert "documents_apitoken" in str(record.exc_info[1])


@pytest.mark.parametrize("debug", [False, True])
def test_an_unknown_api_address_is_a_json_404_with_debug_on_or_off(settings, debug):
    # DEBUG on is the demo's default: Django's own debug page must not answer under /api/.
    settings.DEBUG = debug

    for method, path in [
        ("get", "/api/v1/no-such-thing"),
        ("get", "/api/v2/documents"),
        ("get", "/api/"),
        ("post", "/api/v1/documents/not-a-route/at-all"),
        ("delete", "/api/nothing"),
    ]:
        response = getattr(Client(), method)(path)

        assert response.status_code == 404, (method, path)
        assert response["Content-Type"] == "application/json", (method, path)
        assert response.json() == {"detail": "Not found.", "code": "not_found"}, (method, path)
    # Outside /api/, a page.
    page = Client().get("/no-such-page")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")


def test_a_500_outside_the_api_operations_is_json_under_api_and_a_page_elsewhere(rf):
    api_answer = server_error(rf.get("/api/v1/quota"))
    page_answer = server_error(rf.get("/search/"))

    assert api_answer.status_code == 500 and json.loads(api_answer.content)["code"] == (
        "internal_error"
    )
    assert page_answer.status_code == 500 and page_answer["Content-Type"].startswith("text/html")


def test_under_a_prefix_the_apis_errors_are_json_and_the_pages_stay_html(api):
    # A site served under /paperlane (SCRIPT_NAME): its API is at /paperlane/api/.
    prefixed = {"SCRIPT_NAME": "/paperlane"}

    missing = api.get("/api/v1/no-such-thing", **prefixed)
    refused = api.get("/api/v1/search", {"q": "a\x00b"}, **prefixed)
    page = Client().get("/no-such-page", **prefixed)

    assert (missing.status_code, missing.json()["code"]) == (404, "not_found")
    assert (refused.status_code, refused.json()["code"]) == (400, "invalid_characters")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")
