"""Every API error is JSON `{"detail", "code"}` with the status that says why."""

import pytest
from django.test import Client

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
