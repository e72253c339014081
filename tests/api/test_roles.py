"""The API acts with its token's role: viewers read, members also send work, admins also
remove and manage. A refusal is a 403 that changes nothing; another organisation's
things stay a 404 whatever the role."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from documents.models import ApiToken, Document
from documents.services.tokens import api_token_create
from pipeline.models import ImportRun
from tests.support.files import make_pdf
from tests.support.uploads import upload

pytestmark = pytest.mark.django_db


def _as(org, role: str) -> Client:
    _, raw = api_token_create(organisation=org, name=role, role=role)
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def _refused(response, needed: str, role: str) -> None:
    assert response.status_code == 403, response.content
    body = response.json()
    assert (body["code"], body["role"], body["needed"]) == ("forbidden", role, needed)
    assert body["detail"].startswith(f"This API token has the {role} role: only ")


@pytest.fixture
def queued(api):
    """A document uploaded by the organisation's admin, its run queued."""
    return upload(api, make_pdf(2), name="minutes.pdf").json()


def test_a_viewer_reads_lists_searches_and_downloads(org, queued):
    viewer = _as(org, "viewer")

    assert viewer.get("/api/v1/documents").json()["count"] == 1
    assert viewer.get(f"/api/v1/documents/{queued['document_id']}").status_code == 200
    assert viewer.get(f"/api/v1/runs/{queued['run_id']}").status_code == 200
    assert viewer.get("/api/v1/search", {"q": "minutes"}).status_code == 200
    assert viewer.get("/api/v1/quota").status_code == 200
    assert viewer.get(f"/api/v1/documents/{queued['document_id']}/file").status_code in (200, 302)


def test_a_viewer_cannot_upload_and_nothing_is_recorded(org):
    viewer = _as(org, "viewer")

    response = viewer.post("/api/v1/documents", {"file": SimpleUploadedFile("a.pdf", make_pdf(1))})

    _refused(response, "member", "viewer")
    assert not Document.objects.exists() and not ImportRun.objects.exists()
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (0, 0)


def test_a_viewer_cannot_cancel_or_retry(org, queued):
    viewer = _as(org, "viewer")

    _refused(viewer.post(f"/api/v1/runs/{queued['run_id']}/cancel"), "member", "viewer")
    _refused(viewer.post(f"/api/v1/runs/{queued['run_id']}/retry"), "member", "viewer")
    assert ImportRun.objects.get(id=queued["run_id"]).status == "queued"


def test_a_member_uploads_and_cancels_but_cannot_delete(org):
    member = _as(org, "member")
    accepted = upload(member, make_pdf(1), name="notes.pdf").json()

    assert member.post(f"/api/v1/runs/{accepted['run_id']}/cancel").status_code == 200
    _refused(member.delete(f"/api/v1/documents/{accepted['document_id']}"), "admin", "member")
    assert Document.objects.get(id=accepted["document_id"]).deleted_at is None


def test_an_admin_deletes(org, queued):
    admin = _as(org, "admin")

    assert admin.delete(f"/api/v1/documents/{queued['document_id']}").status_code == 204
    assert Document.objects.get(id=queued["document_id"]).deleted_at is not None


def test_another_organisations_document_is_a_404_for_every_role(other_org, queued):
    for role in ("viewer", "member", "admin"):
        theirs = _as(other_org, role)
        assert theirs.delete(f"/api/v1/documents/{queued['document_id']}").status_code == 404
        assert theirs.post(f"/api/v1/runs/{queued['run_id']}/cancel").status_code == 404
    assert ImportRun.objects.get(id=queued["run_id"]).status == "queued"


def test_only_an_admins_token_lists_or_revokes_other_tokens(org):
    member = _as(org, "member")
    other, _ = api_token_create(organisation=org, name="other")

    _refused(member.get("/api/v1/tokens"), "admin", "member")
    _refused(member.delete(f"/api/v1/tokens/{other.id}"), "admin", "member")
    assert ApiToken.objects.get(id=other.id).revoked_at is None
    assert _as(org, "admin").delete(f"/api/v1/tokens/{other.id}").status_code == 204


def test_any_token_may_revoke_itself(org):
    token, raw = api_token_create(organisation=org, name="leaked", role="viewer")
    viewer = Client(HTTP_AUTHORIZATION=f"Bearer {raw}")

    assert viewer.delete(f"/api/v1/tokens/{token.id}").status_code == 204
    assert viewer.get("/api/v1/quota").status_code == 401


def test_the_openapi_schema_says_which_routes_a_role_may_refuse(client):
    paths = client.get("/api/v1/openapi.json").json()["paths"]

    refusing = {
        (path, method)
        for path, operations in paths.items()
        for method, operation in operations.items()
        if "403" in operation["responses"]
    }
    assert refusing == {
        ("/api/v1/documents", "post"),
        ("/api/v1/documents/{document_id}", "delete"),
        ("/api/v1/runs/{run_id}/retry", "post"),
        ("/api/v1/runs/{run_id}/cancel", "post"),
        ("/api/v1/uploads", "post"),
        ("/api/v1/uploads/{upload_id}/complete", "post"),
        ("/api/v1/tokens", "get"),
        ("/api/v1/tokens/{token_id}", "delete"),
        # Webhook endpoints are admins' (only an admin's token may).
        ("/api/v1/webhooks", "get"),
        ("/api/v1/webhooks", "post"),
        ("/api/v1/webhooks/{endpoint_id}", "get"),
        ("/api/v1/webhooks/{endpoint_id}", "patch"),
        ("/api/v1/webhooks/{endpoint_id}", "delete"),
        ("/api/v1/webhooks/{endpoint_id}/rotate-secret", "post"),
        ("/api/v1/webhooks/{endpoint_id}/test", "post"),
        ("/api/v1/webhooks/{endpoint_id}/deliveries", "get"),
        ("/api/v1/webhooks/{endpoint_id}/deliveries/{delivery_id}/send-again", "post"),
    }
