"""Tokens and tenancy: a token sees only its own organisation."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from documents.models import ApiToken
from documents.services.tokens import api_token_create, api_token_revoke
from tests.support.files import make_pdf

pytestmark = pytest.mark.django_db


def _upload(client):
    response = client.post("/api/v1/documents", {"file": SimpleUploadedFile("a.pdf", make_pdf(2))})
    assert response.status_code == 202, response.content
    return response.json()


def test_a_token_of_another_organisation_gets_404_for_a_run(api, other_api):
    body = _upload(api)

    assert other_api.get(body["status_url"]).status_code == 404
    assert other_api.get(f"/api/v1/documents/{body['document_id']}").status_code == 404
    assert other_api.get("/api/v1/documents").json()["count"] == 0
    assert api.get(body["status_url"]).status_code == 200


def test_documents_are_listed_and_shown_with_their_page_and_chunk_counts(api):
    body = _upload(api)

    listing = api.get("/api/v1/documents").json()
    detail = api.get(f"/api/v1/documents/{body['document_id']}").json()

    assert listing["count"] == 1
    assert listing["items"][0]["id"] == body["document_id"]
    assert detail["filename"] == "a.pdf"
    assert detail["page_count"] is None
    assert detail["chunk_count"] == 0
    assert detail["status"] == "queued"
    assert detail["latest_run_id"] == body["run_id"]


@pytest.mark.parametrize(
    "header", [None, "Bearer", "Bearer nope", "Token pl_abc", "Bearer pl_" + "x" * 43]
)
def test_missing_or_bad_tokens_get_401(header, org):
    client = Client(HTTP_AUTHORIZATION=header) if header else Client()

    response = client.get("/api/v1/quota")

    assert response.status_code == 401
    assert response.json() == {"detail": "Unauthorized"}


def test_a_revoked_token_gets_401(org):
    token, raw = api_token_create(organisation=org)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert client.get("/api/v1/quota").status_code == 200

    api_token_revoke(token=token)

    assert client.get("/api/v1/quota").status_code == 401


def test_tokens_are_stored_hashed_and_note_their_last_use(org):
    token, raw = api_token_create(organisation=org)
    assert raw not in token.token_hash and token.last_used_at is None

    Client(HTTP_AUTHORIZATION=f"Bearer {raw}").get("/api/v1/quota")

    token = ApiToken.objects.get(id=token.id)
    assert token.last_used_at is not None
    assert raw.startswith(token.prefix)


def test_a_malformed_run_id_is_a_422_and_an_unknown_one_404(api):
    assert api.get("/api/v1/runs/not-a-uuid").status_code == 422
    response = api.get("/api/v1/runs/00000000-0000-0000-0000-000000000000")
    assert response.status_code == 404
    assert response.json()["detail"] == "Run not found."


def test_the_openapi_schema_and_docs_are_served(client):
    schema = client.get("/api/v1/openapi.json")

    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert {"/api/v1/documents", "/api/v1/runs/{run_id}", "/api/v1/quota"} <= set(paths)
    assert client.get("/api/v1/docs").status_code == 200
