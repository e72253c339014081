"""The upload form: without JavaScript one post carries one or many files; the page's
script sends each file on its own to a JSON answer, or straight to S3 above a size, and
every refusal says why in plain words while the other files go on."""

import json

import httpx
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from core import uploads as core_uploads
from core.upload_counts import upload_counts
from documents.models import Document, PendingUpload
from pipeline.models import ImportRun
from tests.support.files import HTML_AS_PDF, make_docx, make_encrypted_pdf, make_pdf
from tests.support.members import signed_in
from web import document_views

pytestmark = pytest.mark.django_db


def _file(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data)


def test_without_javascript_one_post_sends_many_files_and_each_says_how_it_went(member_client):
    response = member_client.post(
        "/",
        {
            "file": [
                _file("one.pdf", make_pdf(1)),
                _file("fake.pdf", HTML_AS_PDF),
                _file("two.docx", make_docx(2)),
            ]
        },
        follow=True,
    )

    page = response.content.decode()
    assert response.status_code == 200
    assert "“one.pdf” was accepted" in page and "“two.docx” was accepted" in page
    assert "“fake.pdf”: Only PDF, Word (.docx), PNG, JPEG and TIFF files are supported" in page
    assert sorted(Document.objects.values_list("filename", flat=True)) == ["one.pdf", "two.docx"]
    assert "multiple" in page


def test_without_javascript_a_post_of_only_refused_files_answers_the_first_refusal(
    member_client, org
):
    org.page_limit = 1
    org.save()

    response = member_client.post("/", {"file": [_file("big.pdf", make_pdf(3))]})

    assert response.status_code == 402
    assert "needs 3 pages but only 1 of your page quota are left" in response.content.decode()


def test_a_form_post_carries_at_most_its_bound_of_files(member_client, redis_conn, monkeypatch):
    monkeypatch.setattr(core_uploads, "FORM_MAX_FILES", 2)
    files = [_file(f"f{n}.pdf", make_pdf(1, label=f"F{n}")) for n in range(3)]

    page = member_client.post("/", {"file": files}, follow=True).content.decode()

    assert "Send at most 2 files at once; the others were not sent." in page
    assert Document.objects.count() == 2
    # Its own code, not the API's one_file_per_request.
    assert upload_counts(connection=redis_conn)[("web", "refused", "too_many_files")] == 1


def test_the_script_sends_one_file_and_reads_its_document_and_row(member_client, org):
    response = member_client.post("/upload/", {"file": _file("minutes.pdf", make_pdf(2))})

    assert response.status_code == 202
    answer = response.json()
    run = ImportRun.objects.get(id=answer["run_id"])
    assert (run.source, str(run.document_id)) == ("web", answer["document_id"])
    assert answer["url"] == f"/documents/{run.document_id}/"
    assert f'id="doc-{run.document_id}"' in answer["row"] and "Queued" in answer["item"]


def test_a_file_sent_after_the_session_ended_is_refused_in_json_not_sent_to_sign_in():
    # fetch and XMLHttpRequest follow a redirect: the sign-in page would read as a 200.
    for url in ("/upload/", "/upload/direct/"):
        response = Client().post(url, {"file": _file("late.pdf", make_pdf(1))})

        assert response.status_code == 401
        assert response.json()["detail"] == "You were signed out; sign in again."


@pytest.mark.parametrize(
    ("name", "data", "status", "words"),
    [
        ("notes.pdf", HTML_AS_PDF, 415, "“notes.pdf”: Only PDF, Word (.docx), PNG, JPEG and TIFF"),
        ("locked.pdf", make_encrypted_pdf(), 422, "protected by a password"),
        ("big.pdf", make_pdf(40), 413, "too large. One file may be at most 19.5\xa0KB"),
        ("many.pdf", make_pdf(5), 402, "only 3 of your page quota are left"),
    ],
)
def test_a_refused_file_says_why_in_plain_words(
    member_client, org, settings, name, data, status, words
):
    settings.PAPERLANE_MAX_UPLOAD_BYTES = 20_000
    org.page_limit = 3
    org.save()

    response = member_client.post("/upload/", {"file": _file(name, data)})

    assert response.status_code == status, response.content
    assert words in response.json()["detail"]
    assert not Document.objects.exists()


def test_a_busy_pipeline_says_in_how_many_minutes_to_try_again(member_client, settings, api):
    settings.PAPERLANE_ADMISSION_ORGANISATION_BOUND = 1
    assert member_client.post("/upload/", {"file": _file("a.pdf", make_pdf(1))}).status_code == 202

    response = member_client.post("/upload/", {"file": _file("b.pdf", make_pdf(1))})

    assert response.status_code == 429 and response["Retry-After"]
    assert "try again in" in response.json()["detail"]


def test_a_viewer_cannot_send_a_file_by_the_script_either(org):
    viewer = signed_in(org, "vera", "viewer")

    response = viewer.post("/upload/", {"file": _file("a.pdf", make_pdf(1))})

    assert response.status_code == 403
    assert "only members and admins may upload documents" in response.json()["detail"]
    assert not Document.objects.exists()


def test_the_page_offers_direct_uploads_above_the_size_only_with_s3(member_client, s3, monkeypatch):
    monkeypatch.setattr(document_views, "DIRECT_UPLOAD_BYTES", 1000)

    assert 'data-direct-above="1000"' in member_client.get("/").content.decode()


def test_without_s3_the_page_sends_every_file_through_the_web(member_client, monkeypatch):
    monkeypatch.setattr(document_views, "DIRECT_UPLOAD_BYTES", 1000)

    assert 'data-direct-above="0"' in member_client.get("/").content.decode()
    refused = member_client.post(
        "/upload/direct/",
        json.dumps({"filename": "a.pdf", "size_bytes": 10}),
        content_type="application/json",
    )
    assert refused.status_code == 409 and refused.json()["code"] == "presigned_unsupported"


def test_a_large_file_goes_straight_to_s3_then_is_completed_as_a_web_upload(member_client, s3):
    data = make_pdf(3)

    granted = member_client.post(
        "/upload/direct/",
        json.dumps({"filename": "large.pdf", "size_bytes": len(data), "content_type": None}),
        content_type="application/json",
    )
    assert granted.status_code == 201, granted.content
    grant = granted.json()
    put = httpx.put(grant["url"], content=data, headers=grant["headers"], timeout=10)
    assert put.status_code == 200, put.text
    completed = member_client.post(grant["complete_url"])

    assert completed.status_code == 202, completed.content
    run = ImportRun.objects.get(id=completed.json()["run_id"])
    assert (run.source, run.created_by.username, run.document.filename) == (
        "web",
        "alice",
        "large.pdf",
    )
    assert PendingUpload.objects.get().created_by.username == "alice"


def test_a_direct_upload_asked_for_with_anything_but_a_name_and_a_size_is_a_400(member_client, s3):
    for body in ("[]", "{}", '{"filename": "a.pdf", "size_bytes": "10"}', "not json"):
        response = member_client.post("/upload/direct/", body, content_type="application/json")
        assert response.status_code == 400, body
    form = member_client.post("/upload/direct/", {"filename": "a.pdf"})
    assert form.status_code == 400


def test_another_organisations_direct_upload_is_not_completed(s3, org, other_org, other_api):
    member = signed_in(org, "mo", "member")
    data = make_pdf(1)
    grant = other_api.post(
        "/api/v1/uploads",
        {"filename": "theirs.pdf", "size_bytes": len(data)},
        content_type="application/json",
    ).json()

    response = member.post(f"/upload/direct/{grant['upload_id']}/complete/")

    assert response.status_code == 404
    assert not Document.objects.exists()


def test_the_files_sent_before_a_form_post_passes_the_size_limit_are_kept(member_client, settings):
    first, second = make_pdf(10), make_pdf(10, label="second")
    settings.PAPERLANE_MAX_UPLOAD_BYTES = len(first) + len(second) // 2

    page = member_client.post(
        "/", {"file": [_file("first.pdf", first), _file("second.pdf", second)]}, follow=True
    ).content.decode()

    assert "“first.pdf” was accepted" in page and "The file is too large." in page
    assert list(Document.objects.values_list("filename", flat=True)) == ["first.pdf"]


# --- The same bytes again ------------------------------------------------------------


def test_the_script_is_told_a_file_was_already_uploaded_and_may_send_a_second_copy(
    member_client, org
):
    first = member_client.post("/upload/", {"file": _file("minutes.pdf", make_pdf(2))}).json()

    again = member_client.post("/upload/", {"file": _file("minutes-copy.pdf", make_pdf(2))})

    assert again.status_code == 200, again.content
    answer = again.json()
    assert answer["duplicate_of"] == answer["document_id"] == first["document_id"]
    assert answer["url"] == first["url"]
    assert answer["filename"] == "minutes.pdf"
    assert Document.objects.filter(organisation=org).count() == 1
    org.refresh_from_db()
    assert org.pages_reserved == 2

    copy = member_client.post(
        "/upload/",
        {"file": _file("minutes-copy.pdf", make_pdf(2)), "allow_duplicate": "true"},
    )

    assert copy.status_code == 202
    assert copy.json()["document_id"] != first["document_id"]
    org.refresh_from_db()
    assert org.pages_reserved == 4


def test_without_javascript_a_file_already_uploaded_links_to_it_and_offers_a_second_copy(
    member_client, org
):
    member_client.post("/", {"file": [_file("minutes.pdf", make_pdf(2))]})
    document = Document.objects.get(organisation=org)

    page = member_client.post(
        "/", {"file": [_file("again.pdf", make_pdf(2))]}, follow=True
    ).content.decode()

    assert (
        f"“again.pdf” was already uploaded as "
        f'<a href="/documents/{document.id}/">minutes.pdf</a>' in page
    )
    assert 'name="allow_duplicate"' in page
    assert Document.objects.filter(organisation=org).count() == 1

    member_client.post("/", {"file": [_file("again.pdf", make_pdf(2))], "allow_duplicate": "true"})

    assert Document.objects.filter(organisation=org).count() == 2
    org.refresh_from_db()
    assert org.pages_reserved == 4
