"""The documents and runs API: tenancy, listings, the schema."""

import pytest

from tests.support.files import make_pdf
from tests.support.uploads import accepted_run, upload

pytestmark = pytest.mark.django_db


def _accepted(client) -> dict:
    response = upload(client, make_pdf(2), name="a.pdf")
    assert response.status_code == 202, response.content
    return response.json()


def test_a_token_of_another_organisation_gets_404_for_a_run(api, other_api):
    body = _accepted(api)

    assert other_api.get(body["status_url"]).status_code == 404
    assert other_api.get(f"/api/v1/documents/{body['document_id']}").status_code == 404
    assert other_api.get("/api/v1/documents").json()["count"] == 0
    assert api.get(body["status_url"]).status_code == 200


def test_documents_are_listed_and_shown_with_their_page_and_chunk_counts(api):
    body = _accepted(api)

    listing = api.get("/api/v1/documents").json()
    detail = api.get(f"/api/v1/documents/{body['document_id']}").json()

    assert listing["count"] == 1
    assert listing["items"][0]["id"] == body["document_id"]
    assert detail["filename"] == "a.pdf"
    assert detail["page_count"] is None
    assert detail["chunk_count"] == 0
    assert detail["status"] == "queued"
    assert detail["latest_run_id"] == body["run_id"]


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
    assert "delete" in paths["/api/v1/documents/{document_id}"]
    served = paths["/api/v1/documents/{document_id}/file"]["get"]["responses"]["200"]["content"]
    assert served["application/pdf"]["schema"] == {"type": "string", "format": "binary"}
    assert client.get("/api/v1/docs").status_code == 200


def test_an_offset_past_the_list_is_an_empty_page_and_past_its_bound_a_422(api):
    accepted_run(api, make_pdf(1))

    response = api.get("/api/v1/documents?offset=1000000000000")
    beyond = api.get("/api/v1/documents?offset=1000000000001")

    assert response.status_code == 200, response.content
    assert response.json()["items"] == [] and response.json()["count"] == 1
    assert beyond.status_code == 422 and beyond.json()["code"] == "invalid_request"
    assert beyond.json()["errors"][0]["loc"] == ["query", "offset"]


@pytest.mark.parametrize("query", ["limit=0", "limit=-1", "limit=201", "limit=x", "offset=-1"])
def test_a_page_out_of_bounds_is_a_422_not_clamped(api, query):
    response = api.get(f"/api/v1/documents?{query}")

    assert response.status_code == 422, response.content
    assert response.json()["code"] == "invalid_request"
