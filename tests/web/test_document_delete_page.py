"""Deleting a document from the documents page: a confirmation, then a POST with CSRF."""

import re

import pytest
from django.test import Client

from documents.models import Document
from documents.services.organisations import member_add
from pipeline.models import ImportRun
from tests.support.files import make_pdf
from tests.support.pages import page_text
from tests.support.runs import drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db


def confirm_url(document) -> str:
    return f"/documents/{document.id}/delete/"


def test_a_member_deletes_a_document_in_the_pipeline_after_confirming(member_client, api, org):
    run = accepted_run(api, make_pdf(3), name="minutes.pdf")
    listing = member_client.get("/").content.decode()
    assert f'href="{confirm_url(run.document)}"' in listing

    confirmation = member_client.get(confirm_url(run.document))

    assert confirmation.status_code == 200
    text = page_text(confirmation)
    assert "Delete “minutes.pdf”?" in text and "Its processing stops now" in text
    assert "cannot be undone" in text
    forms = re.findall(r'<form method="post" action="([^"]+)"', confirmation.content.decode())
    assert confirm_url(run.document) in forms
    assert Document.objects.get(id=run.document_id).deleted_at is None  # asking deletes nothing

    done = member_client.post(confirm_url(run.document), follow=True)

    assert "“minutes.pdf” was deleted. 3 held pages were given back." in page_text(done)
    assert "minutes.pdf" not in page_text(member_client.get("/")).replace("“minutes.pdf”", "")
    document = Document.objects.get(id=run.document_id)
    assert document.deleted_at is not None and document.deleted_by == "user:alice"
    assert ImportRun.objects.get(id=run.id).status == "cancelled"
    assert member_client.get(confirm_url(run.document)).status_code == 404


@pytest.mark.django_db(transaction=True)
def test_the_confirmation_says_the_pages_charged_stay_charged(member_client, api):
    run = drive(accepted_run(api, make_pdf(2), name="paid.pdf").id)

    text = page_text(member_client.get(confirm_url(run.document)))

    assert "The 2 pages already charged for it stay charged." in text
    assert "Its processing stops" not in text


def test_deleting_again_says_it_is_gone(member_client, api):
    run = accepted_run(api, make_pdf(1), name="twice.pdf")
    member_client.post(confirm_url(run.document))

    again = member_client.post(confirm_url(run.document), follow=True)

    assert "That document is not there any more." in page_text(again)
    assert member_client.get(confirm_url(run.document)).status_code == 404


def test_a_delete_without_the_csrf_token_is_refused(org, api):
    run = accepted_run(api, make_pdf(1))
    member_add(organisation=org, username="mallory", password="pw-for-mallory")
    client = Client(enforce_csrf_checks=True)
    client.login(username="mallory", password="pw-for-mallory")

    assert client.post(confirm_url(run.document)).status_code == 403
    assert Document.objects.get(id=run.document_id).deleted_at is None


def test_a_member_cannot_delete_another_organisations_document(member_client, other_api):
    run = accepted_run(other_api, make_pdf(1), name="theirs.pdf")

    assert member_client.get(confirm_url(run.document)).status_code == 404
    assert member_client.post(confirm_url(run.document)).status_code == 404
    assert Document.objects.get(id=run.document_id).deleted_at is None
    assert ImportRun.objects.get(id=run.id).status == "queued"


def test_deleting_needs_a_login(client, api):
    run = accepted_run(api, make_pdf(1))

    response = client.post(confirm_url(run.document))

    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert Document.objects.get(id=run.document_id).deleted_at is None


def test_one_held_page_given_back_is_said_in_the_singular(member_client, api):
    run = accepted_run(api, make_pdf(1), name="one.pdf")

    done = member_client.post(confirm_url(run.document), follow=True)

    assert "“one.pdf” was deleted. 1 held page was given back." in page_text(done)
