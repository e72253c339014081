"""The member pages offer what the member's role allows, and refuse the rest with a 403
that says why; another organisation's things stay a 404."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from documents.models import Document
from documents.services.organisations import member_add
from pipeline.models import ImportRun
from tests.support.files import make_pdf
from tests.support.folders import local_folder_fixtures
from tests.support.uploads import upload

pytestmark = pytest.mark.django_db
PASSWORD = "correct horse battery"


def _signed_in(org, role: str) -> Client:
    member_add(organisation=org, username=role, password=PASSWORD, role=role)
    client = Client()
    assert client.login(username=role, password=PASSWORD)
    return client


@pytest.fixture
def queued(api):
    return upload(api, make_pdf(2), name="minutes.pdf").json()


def test_a_viewer_sees_the_documents_without_upload_cancel_or_delete(org, queued):
    page = _signed_in(org, "viewer").get("/").content.decode()

    assert "minutes.pdf" in page
    assert "You are a viewer of" in page
    assert 'type="file"' not in page
    assert "/cancel/" not in page and "/delete/" not in page


def test_a_viewers_upload_is_a_403_that_says_why_and_records_nothing(org):
    response = _signed_in(org, "viewer").post(
        "/", {"file": SimpleUploadedFile("a.pdf", make_pdf(1))}
    )

    assert response.status_code == 403
    assert "only members and admins may upload documents" in response.content.decode()
    assert not Document.objects.exists()


def test_a_viewers_cancel_is_a_403_and_the_run_goes_on(org, queued):
    response = _signed_in(org, "viewer").post(f"/runs/{queued['run_id']}/cancel/")

    assert response.status_code == 403
    assert "only members and admins may cancel runs" in response.content.decode()
    assert ImportRun.objects.get(id=queued["run_id"]).status == "queued"


def test_a_member_cancels_but_is_not_offered_or_allowed_delete(org, queued):
    member = _signed_in(org, "member")
    assert "/cancel/" in member.get("/").content.decode()
    assert "/delete/" not in member.get("/").content.decode()

    assert member.post(f"/runs/{queued['run_id']}/cancel/").status_code == 302
    page = member.get(f"/documents/{queued['document_id']}/delete/")
    refused = member.post(f"/documents/{queued['document_id']}/delete/")

    assert ImportRun.objects.get(id=queued["run_id"]).status == "cancelled"
    assert (page.status_code, refused.status_code) == (403, 403)
    assert "only admins may delete documents" in refused.content.decode()
    assert Document.objects.get(id=queued["document_id"]).deleted_at is None


def test_an_admin_deletes(org, queued):
    admin = _signed_in(org, "admin")

    assert admin.post(f"/documents/{queued['document_id']}/delete/").status_code == 302
    assert Document.objects.get(id=queued["document_id"]).deleted_at is not None


def test_another_organisations_document_and_run_are_404s(other_org, queued):
    theirs = _signed_in(other_org, "admin")

    assert theirs.post(f"/runs/{queued['run_id']}/cancel/").status_code == 404
    assert theirs.get(f"/documents/{queued['document_id']}/delete/").status_code == 404
    assert ImportRun.objects.get(id=queued["run_id"]).status == "queued"


_fast_settle, folder, connection = local_folder_fixtures("roles")


@pytest.mark.django_db(transaction=True)
def test_only_an_admin_pauses_or_disconnects_a_connection_and_a_viewer_cannot_sync(org, connection):
    viewer, member, admin = (_signed_in(org, role) for role in ("viewer", "member", "admin"))
    base = f"/connections/{connection.id}"

    viewer_page = viewer.get(f"{base}/").content.decode()
    member_page = member.get(f"{base}/").content.decode()
    assert f"{base}/sync/" not in viewer_page and f"{base}/pause/" not in viewer_page
    assert f"{base}/sync/" in member_page and f"{base}/pause/" not in member_page
    assert f"{base}/disconnect/" in admin.get(f"{base}/").content.decode()

    assert viewer.post(f"{base}/sync/").status_code == 403
    assert member.post(f"{base}/sync/").status_code == 302
    for refused in (member.post(f"{base}/pause/"), member.get(f"{base}/disconnect/")):
        assert refused.status_code == 403
        assert "only admins may connect, pause or disconnect folders" in refused.content.decode()
    connection.refresh_from_db()
    assert connection.status == "active"

    assert admin.post(f"{base}/pause/").status_code == 302
    connection.refresh_from_db()
    assert connection.status == "paused"


def test_only_an_admin_is_offered_or_allowed_to_connect_onedrive(org, settings):
    settings.PAPERLANE_ONEDRIVE_CLIENT_ID = "client"
    settings.PAPERLANE_ONEDRIVE_CLIENT_SECRET = "secret"
    member, admin = _signed_in(org, "member"), _signed_in(org, "admin")

    assert "Connect a OneDrive folder" not in member.get("/connections/").content.decode()
    assert "Connect a OneDrive folder" in admin.get("/connections/").content.decode()
    refused = member.post("/connections/onedrive/connect/", {"folder": "/Contracts"})
    assert refused.status_code == 403
    assert "microsoftonline" not in refused.get("Location", "")
    assert admin.post("/connections/onedrive/connect/", {"folder": "/Contracts"}).status_code == 302
