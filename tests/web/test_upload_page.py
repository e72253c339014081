"""The documents page: members upload, follow, cancel and retry their runs."""

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from documents.services.organisations import member_add
from pipeline.models import ImportRun
from tests.support.files import HTML_AS_PDF, make_pdf
from tests.support.uploads import upload

pytestmark = pytest.mark.django_db


def test_the_documents_page_needs_a_login(client):
    response = client.get("/")

    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_a_member_uploads_a_pdf_and_sees_it_queued(member_client, org):
    response = member_client.post(
        "/", {"file": SimpleUploadedFile("minutes.pdf", make_pdf(3))}, follow=True
    )

    assert response.status_code == 200
    page = response.content.decode()
    assert "minutes.pdf" in page and "accepted" in page and "Queued" in page
    run = ImportRun.objects.get(organisation=org)
    assert (run.source, run.created_by.username) == ("web", "alice")
    assert "data-quota-left>997</strong> left, of 1000 pages" in page


def test_a_bad_file_gets_a_plain_message_and_nothing_is_created(member_client, org):
    response = member_client.post("/", {"file": SimpleUploadedFile("fake.pdf", HTML_AS_PDF)})

    assert response.status_code == 415
    assert "this file is an HTML page" in response.content.decode()
    assert not ImportRun.objects.exists()


def test_a_member_sees_only_their_organisations_documents(member_client, api, other_api):
    upload(api, make_pdf(1), name="ours.pdf")
    upload(other_api, make_pdf(1), name="secret.pdf")

    response = member_client.get("/")

    assert response.status_code == 200
    page = response.content.decode()
    assert "ours.pdf" in page
    assert "secret.pdf" not in page


def test_a_user_without_an_organisation_is_refused(org):
    User.objects.create_user("bob", password="pw-for-bob-123")
    client = Client()
    client.login(username="bob", password="pw-for-bob-123")

    assert client.get("/").status_code == 403


def test_a_member_of_two_organisations_switches_between_them(org, other_org):
    member_add(organisation=org, username="carol", password="pw-for-carol-1")
    member_add(organisation=other_org, username="carol")
    client = Client()
    client.login(username="carol", password="pw-for-carol-1")

    client.post("/organisation/", {"organisation": "globex"})
    client.post("/", {"file": SimpleUploadedFile("g.pdf", make_pdf(1))})

    assert ImportRun.objects.get().organisation == other_org


def test_a_member_cancels_and_retries_a_run_from_the_page(member_client, org):
    member_client.post("/", {"file": SimpleUploadedFile("minutes.pdf", make_pdf(3))})
    run = ImportRun.objects.get(organisation=org)

    page = member_client.post(f"/runs/{run.id}/cancel/", follow=True).content.decode()
    assert "was cancelled" in page and "Retry" in page
    assert ImportRun.objects.get(id=run.id).status == "cancelled"

    page = member_client.post(f"/runs/{run.id}/retry/", follow=True).content.decode()
    assert "will be processed again" in page
    assert ImportRun.objects.get(id=run.id).status == "queued"


def test_a_member_cannot_act_on_another_organisations_run(member_client, other_api):
    response = upload(other_api, make_pdf(1), name="theirs.pdf")
    run_id = response.json()["run_id"]

    assert member_client.post(f"/runs/{run_id}/cancel/").status_code == 404
    assert ImportRun.objects.get(id=run_id).status == "queued"


def test_an_oversized_file_gets_a_plain_message(member_client, org, settings):
    settings.PAPERLANE_MAX_UPLOAD_BYTES = 20_000

    response = member_client.post("/", {"file": SimpleUploadedFile("big.pdf", make_pdf(60))})

    assert response.status_code == 413
    assert "The file is too large. One file may be at most 19.5" in response.content.decode()
    assert not ImportRun.objects.exists()
