"""Direct uploads (POST /uploads, then /uploads/{id}/complete) against moto's S3 server:
real PUTs to the presigned URL, the same checks and answers as a multipart upload."""

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from botocore.config import Config
from django.db import connections, transaction
from django.test import Client
from django.utils import timezone

from core.errors import UnreadableDocument
from documents.models import Document, PendingUpload, QuotaReservation, UsageEntry
from documents.services import pending_uploads
from documents.services.tokens import api_token_create
from pipeline import sweeper
from pipeline.models import ImportRun
from pipeline.services import direct_uploads as presigned_service
from pipeline.sweeper import sweep_once
from tests.support.admin import make_runs
from tests.support.files import (
    HTML_AS_PDF,
    make_docx,
    make_encrypted_pdf,
    make_pdf,
)
from tests.support.locks import another_connection
from tests.support.pipeline import running_workers, wait_for, wait_terminal
from tests.support.s3 import bucket_keys, storage_reopened
from tests.support.silent import silent_server
from tests.support.uploads import upload

pytestmark = pytest.mark.django_db

UPLOADS = "/api/v1/uploads"
PDF_TYPE = "application/pdf"


def ask(api, *, filename: str = "big.pdf", size_bytes: int, content_type: str | None = None):
    """POST /uploads; returns the response."""
    body = {"filename": filename, "size_bytes": size_bytes}
    if content_type is not None:
        body["content_type"] = content_type
    return api.post(UPLOADS, body, content_type="application/json")


def granted(api, data: bytes, *, filename: str = "big.pdf") -> dict:
    """Ask for an upload of `data`; returns the 201's body."""
    response = ask(api, filename=filename, size_bytes=len(data))
    assert response.status_code == 201, response.content
    return response.json()


def put(grant: dict, data: bytes, **headers: str) -> httpx.Response:
    """PUT `data` to the grant's URL with its headers (and `headers` over them), over HTTP."""
    sent = {**grant["headers"], **headers}
    return httpx.put(grant["url"], content=data, headers=sent, timeout=10)


def put_for(api, data: bytes, *, filename: str = "big.pdf") -> dict:
    """Ask for an upload of `data` and PUT it; returns the grant."""
    grant = granted(api, data, filename=filename)
    assert put(grant, data).status_code == 200
    return grant


def complete(api, upload_id: str):
    return api.post(f"{UPLOADS}/{upload_id}/complete")


def nothing_accepted(org) -> bool:
    org.refresh_from_db()
    return (
        not Document.objects.filter(organisation=org).exists()
        and not ImportRun.objects.filter(organisation=org).exists()
        and not QuotaReservation.objects.filter(organisation=org).exists()
        and (org.pages_reserved, org.pages_used) == (0, 0)
    )


# --- The whole way, with real workers ---------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_file_put_to_its_url_and_completed_is_processed_and_charged_its_own_pages(s3, api, org):
    pdf = make_pdf(7, words_per_page=120)
    grant = put_for(api, pdf, filename="annual report.pdf")

    response = complete(api, grant["upload_id"])

    assert response.status_code == 202, response.content
    body = response.json()
    run = ImportRun.objects.select_related("document").get(id=body["run_id"])
    assert body == {
        "run_id": str(run.id),
        "document_id": str(run.document_id),
        "status": "queued",
        "status_url": f"/api/v1/runs/{run.id}",
        "filename": "annual report.pdf",
        "duplicate_of": None,
    }
    pending = PendingUpload.objects.get(id=grant["upload_id"])
    assert pending.document_id == run.document_id and pending.completed_at is not None
    # The document keeps the object where it was PUT: no copy.
    assert run.document.storage_key == pending.storage_key
    assert bucket_keys(s3) == [pending.storage_key]
    assert (run.source, run.document.filename, run.document.size_bytes) == (
        "api",
        "annual report.pdf",
        len(pdf),
    )

    with running_workers(**s3.env):
        finished = wait_terminal([run.id], timeout=60)[run.id]

    assert finished.status == "succeeded", finished.error_message
    assert Document.objects.get(id=run.document_id).page_count == 7
    assert list(UsageEntry.objects.filter(document=run.document_id).values_list("pages")) == [(7,)]
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (7, 0)


# --- Asking for a URL ----------------------------------------------------------------------


def test_the_url_takes_one_put_of_the_declared_size_and_type_under_the_organisations_prefix(
    s3, api, org, settings
):
    before = timezone.now()

    response = ask(api, filename="scan.pdf", size_bytes=12_345)

    assert response.status_code == 201, response.content
    grant = response.json()
    assert grant["method"] == "PUT"
    assert grant["headers"] == {
        "Content-Type": PDF_TYPE,
        "Content-Length": "12345",
        "If-None-Match": "*",
    }
    url = urlsplit(grant["url"])
    query = parse_qs(url.query)
    assert query["X-Amz-SignedHeaders"] == ["content-length;content-type;host;if-none-match"]
    assert query["X-Amz-Expires"] == [str(settings.PAPERLANE_UPLOAD_URL_SECONDS)]
    pending = PendingUpload.objects.get(id=grant["upload_id"])
    assert url.path == f"/{s3.bucket}/{pending.storage_key}"
    assert pending.storage_key == (
        f"orgs/{org.id}/documents/{pending.reserved_document_id}/v1/original.pdf"
    )
    assert (pending.filename, pending.size_bytes, pending.kind) == ("scan.pdf", 12_345, "pdf")
    assert pending.api_token is not None and pending.completed_at is None
    expires_at = before + timedelta(seconds=settings.PAPERLANE_UPLOAD_URL_SECONDS)
    assert abs((pending.expires_at - expires_at).total_seconds()) < 5
    assert pending.complete_by - pending.expires_at == timedelta(
        seconds=presigned_service.COMPLETE_SECONDS
    )
    assert grant["complete_url"] == f"{UPLOADS}/{pending.id}/complete"
    assert bucket_keys(s3) == []


def test_a_second_put_to_the_url_cannot_replace_the_bytes(s3, api):
    pdf = make_pdf(2)
    grant = put_for(api, pdf)

    other = make_pdf(2, label="Edit")
    assert len(other) == len(pdf)

    again = put(grant, other)

    assert again.status_code == 412
    pending = PendingUpload.objects.get(id=grant["upload_id"])
    stored = s3.client.get_object(Bucket=s3.bucket, Key=pending.storage_key)["Body"].read()
    assert stored == pdf


def test_a_docx_declared_by_its_type_alone_is_signed_with_the_docx_type(s3, api):
    docx_type = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

    response = ask(api, filename="minutes", size_bytes=100, content_type=docx_type)

    assert response.status_code == 201, response.content
    assert response.json()["headers"]["Content-Type"] == docx_type
    assert PendingUpload.objects.get().storage_key.endswith("/v1/original.docx")


@pytest.mark.parametrize(
    ("filename", "size_bytes", "content_type", "status", "code"),
    [
        ("big.pdf", 50 * 1024 * 1024 + 1, None, 413, "file_too_large"),
        ("notes.txt", 100, None, 415, "unsupported_type"),
        ("photo.pdf", 100, "image/png", 415, "unsupported_type"),
        ("report.pdf", 100, "application/msword", 415, "unsupported_type"),
        (
            "report.pdf",
            100,
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            415,
            "unsupported_type",
        ),
        ("../../etc/passwd.pdf", 100, None, 400, "invalid_filename"),
        ("empty.pdf", 0, None, 400, "empty_file"),
        ("negative.pdf", -5, None, 422, "invalid_request"),
    ],
    ids=[
        "too-large",
        "text-file",
        "image-type",
        "legacy-word-type",
        "name-and-type-disagree",
        "path-traversal",
        "empty",
        "negative-size",
    ],
)
def test_what_an_upload_would_be_refused_for_unread_is_refused_before_a_url(
    s3, api, org, filename, size_bytes, content_type, status, code
):
    response = ask(api, filename=filename, size_bytes=size_bytes, content_type=content_type)

    assert response.status_code == status, response.content
    assert response.json()["code"] == code
    assert not PendingUpload.objects.exists()


def test_a_full_pipeline_refuses_the_url_with_429_and_retry_after(s3, api, org, settings):
    settings.PAPERLANE_ADMISSION_BACKLOG_BOUND = 2
    make_runs(org, 2, held=True, status="queued", stage="extract", due_at=timezone.now())

    response = ask(api, size_bytes=1000)

    assert response.status_code == 429, response.content
    assert int(response["Retry-After"]) >= 1
    assert response.json()["code"] == "busy"
    assert not PendingUpload.objects.exists()


def test_an_organisation_with_no_page_left_is_refused_the_url_with_402(s3, api, org):
    org.page_limit = 0
    org.save(update_fields=["page_limit"])

    response = ask(api, size_bytes=1000)

    assert response.status_code == 402, response.content
    assert response.json()["pages_available"] == 0
    assert not PendingUpload.objects.exists()


def test_an_organisation_with_its_bound_of_open_uploads_is_refused_until_one_ends(
    s3, api, other_api, settings, monkeypatch
):
    monkeypatch.setattr(pending_uploads, "OPEN_PER_ORGANISATION", 2)
    first = granted(api, b"x" * 10)
    granted(api, b"x" * 10)

    refused = ask(api, size_bytes=10)
    other_organisation = ask(other_api, size_bytes=10)

    assert refused.status_code == 429, refused.content
    assert refused.json()["code"] == "too_many_open_uploads"
    wait = int(refused["Retry-After"])
    assert (
        settings.PAPERLANE_UPLOAD_URL_SECONDS
        < wait
        <= settings.PAPERLANE_UPLOAD_URL_SECONDS + presigned_service.COMPLETE_SECONDS + 1
    )
    assert other_organisation.status_code == 201
    # One that expired no longer counts.
    PendingUpload.objects.filter(id=first["upload_id"]).update(complete_by=timezone.now())
    assert ask(api, size_bytes=10).status_code == 201


def test_open_uploads_are_bounded_in_bytes_until_enough_of_them_end(
    s3, api, other_api, monkeypatch
):
    monkeypatch.setattr(pending_uploads, "OPEN_BYTES_PER_ORGANISATION", 100)
    first = granted(api, b"x" * 60)
    second = granted(api, b"x" * 30)
    later = timezone.now() + timedelta(hours=2)
    PendingUpload.objects.filter(id=second["upload_id"]).update(complete_by=later)

    refused = ask(api, size_bytes=20)  # 60 + 30 + 20 > 100
    other_organisation = ask(other_api, size_bytes=20)

    assert refused.status_code == 429, refused.content
    body = refused.json()
    assert body["code"] == "too_many_open_upload_bytes"
    assert "90 bytes" in body["detail"] and "100 bytes" in body["detail"]
    # Room once the first (60 bytes) has expired: about when it is due to.
    wait = int(refused["Retry-After"])
    assert body["retry_after"] == wait
    complete_by = PendingUpload.objects.get(id=first["upload_id"]).complete_by
    assert abs((complete_by - timezone.now()).total_seconds() - wait) <= 2
    assert other_organisation.status_code == 201
    assert ask(api, size_bytes=10).status_code == 201  # 60 + 30 + 10 fits
    PendingUpload.objects.filter(id=first["upload_id"]).update(complete_by=timezone.now())
    assert ask(api, size_bytes=55).status_code == 201  # the expired one no longer counts


def test_a_file_larger_than_the_open_bytes_bound_alone_is_a_413(s3, api, monkeypatch):
    monkeypatch.setattr(pending_uploads, "OPEN_BYTES_PER_ORGANISATION", 100)

    refused = ask(api, size_bytes=101)

    assert refused.status_code == 413, refused.content
    assert refused.json()["code"] == "open_upload_bytes_exceeded"
    assert refused.json()["max_bytes"] == 100
    assert not PendingUpload.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_two_requests_at_once_cannot_pass_the_open_bytes_bound_together(s3, org, monkeypatch):
    monkeypatch.setattr(pending_uploads, "OPEN_BYTES_PER_ORGANISATION", 100)
    _, raw = api_token_create(organisation=org, name="racing")

    def asking():
        try:
            return ask(Client(HTTP_AUTHORIZATION=f"Bearer {raw}"), size_bytes=60)
        finally:
            connections.close_all()

    with (
        another_connection() as holder,
        another_connection(autocommit=True) as watcher,
        ThreadPoolExecutor(2) as pool,
    ):
        # Both have been checked for everything else and signed their URLs; each fits alone.
        holder.execute(
            "SELECT 1 FROM documents_organisation WHERE id = %s FOR NO KEY UPDATE", [org.id]
        )
        answers = [pool.submit(asking) for _ in range(2)]
        wait_for(lambda: _lock_waits(watcher) == 2, timeout=20, what="both requests to wait")
        holder.commit()
        statuses = sorted(answer.result().status_code for answer in answers)

    assert statuses == [201, 429]
    assert PendingUpload.objects.filter(organisation=org).count() == 1


def test_without_s3_both_endpoints_answer_409_presigned_unsupported(api, org):
    asked = ask(api, size_bytes=1000)
    pending = PendingUpload.objects.create(
        organisation=org,
        storage_key="orgs/1/documents/x/v1/original.pdf",
        filename="a.pdf",
        kind="pdf",
        content_type=PDF_TYPE,
        size_bytes=10,
        expires_at=timezone.now() + timedelta(minutes=5),
        complete_by=timezone.now() + timedelta(minutes=65),
    )

    completed = complete(api, str(pending.id))

    for response in (asked, completed):
        assert response.status_code == 409, response.content
        assert response.json()["code"] == "presigned_unsupported"
        assert "POST /api/v1/documents" in response.json()["detail"]
    assert PendingUpload.objects.count() == 1


# --- Completing ----------------------------------------------------------------------------


def test_completing_twice_answers_the_same_202_and_makes_and_charges_nothing_more(s3, api, org):
    grant = put_for(api, make_pdf(3))

    first = complete(api, grant["upload_id"])
    second = complete(api, grant["upload_id"])

    assert first.status_code == second.status_code == 202, second.content
    assert first.json() == second.json()
    assert ImportRun.objects.filter(organisation=org).count() == 1
    assert QuotaReservation.objects.filter(organisation=org).count() == 1
    org.refresh_from_db()
    assert org.pages_reserved == 3


def test_bytes_already_uploaded_are_answered_200_and_the_upload_stays_open_for_a_copy(s3, api, org):
    pdf = make_pdf(2, label="Twice")
    first = upload(api, pdf, name="first.pdf").json()
    grant = put_for(api, pdf)

    again = complete(api, grant["upload_id"])

    assert again.status_code == 200, again.content
    assert again.json()["duplicate_of"] == first["document_id"]
    pending = PendingUpload.objects.get(id=grant["upload_id"])
    assert not pending.is_completed and pending.storage_key in bucket_keys(s3)
    org.refresh_from_db()
    assert org.pages_reserved == 2

    copy = api.post(f"{UPLOADS}/{grant['upload_id']}/complete?allow_duplicate=true")

    assert copy.status_code == 202, copy.content
    assert copy.json()["document_id"] == str(pending.reserved_document_id)
    org.refresh_from_db()
    assert org.pages_reserved == 4


def test_two_completions_at_once_make_one_document_and_both_get_its_202(s3, api, org):
    grant = put_for(api, make_pdf(2))
    first = complete(api, grant["upload_id"]).json()
    # The second read the upload as open before the first committed: it gets as far as
    # writing the same document, and is answered with the first's.
    PendingUpload.objects.filter(id=grant["upload_id"]).update(document=None, completed_at=None)
    pending = PendingUpload.objects.get(id=grant["upload_id"])

    second = complete(api, grant["upload_id"])

    assert second.status_code == 202, second.content
    assert second.json() == first
    assert ImportRun.objects.filter(organisation=org).count() == 1
    org.refresh_from_db()
    assert org.pages_reserved == 2
    assert bucket_keys(s3) == [pending.storage_key]


def test_another_organisations_upload_is_not_found_and_left_alone(s3, api, other_api, org):
    grant = put_for(api, make_pdf(1))

    response = complete(other_api, grant["upload_id"])

    assert response.status_code == 404, response.content
    assert response.json()["code"] == "not_found"
    assert complete(api, grant["upload_id"]).status_code == 202


def test_an_unknown_upload_is_not_found(s3, api):
    assert complete(api, str(uuid.uuid4())).status_code == 404


def test_an_upload_completed_too_late_is_gone(s3, api, org):
    grant = put_for(api, make_pdf(1))
    PendingUpload.objects.filter(id=grant["upload_id"]).update(
        complete_by=timezone.now() - timedelta(seconds=1)
    )

    response = complete(api, grant["upload_id"])

    assert response.status_code == 410, response.content
    assert response.json()["code"] == "upload_expired"
    assert nothing_accepted(org)


def test_completing_before_anything_was_put_is_409_upload_missing(s3, api, org):
    grant = granted(api, make_pdf(1))

    response = complete(api, grant["upload_id"])

    assert response.status_code == 409, response.content
    assert response.json()["code"] == "upload_missing"
    assert nothing_accepted(org)


def test_a_file_of_another_size_than_declared_is_422_and_deleted(s3, api, org):
    pdf = make_pdf(2)
    grant = granted(api, pdf)
    # S3 refuses such a PUT (the length is signed); moto does not check signatures.
    headers = {k: v for k, v in grant["headers"].items() if k != "Content-Length"}
    assert httpx.put(grant["url"], content=pdf + b"\n% more", headers=headers).status_code == 200

    response = complete(api, grant["upload_id"])

    assert response.status_code == 422, response.content
    assert response.json()["code"] == "size_mismatch"
    assert bucket_keys(s3) == []
    assert nothing_accepted(org)


def test_a_file_replaced_after_it_was_looked_at_is_422_and_read_no_further(
    s3, api, org, monkeypatch
):
    pdf = make_pdf(2)
    grant = granted(api, pdf)
    headers = {k: v for k, v in grant["headers"].items() if k != "Content-Length"}
    assert httpx.put(grant["url"], content=pdf * 50, headers=headers).status_code == 200
    # The HEAD saw the declared size; the object grew before it was read.
    monkeypatch.setattr(presigned_service, "stored_size", lambda *, key: len(pdf))

    response = complete(api, grant["upload_id"])

    assert response.status_code == 422, response.content
    assert f"is {len(pdf) + 1} bytes" in response.json()["detail"]
    assert bucket_keys(s3) == [] and nothing_accepted(org)


@pytest.mark.parametrize(
    ("data", "status", "code"),
    [
        (make_encrypted_pdf(), 422, "encrypted_pdf"),
        (make_pdf(5)[:400] + b"\n%%EOF\n", 422, "damaged_pdf"),
        (make_pdf(5)[:-400], 422, "truncated_pdf"),
        (HTML_AS_PDF, 415, "unsupported_type"),
    ],
    ids=["encrypted", "gutted", "truncated", "html"],
)
def test_a_hostile_file_gets_the_multipart_answer_and_is_deleted(s3, api, org, data, status, code):
    multipart = upload(api, data, name="hostile.pdf")
    grant = put_for(api, data, filename="hostile.pdf")

    response = complete(api, grant["upload_id"])

    assert (response.status_code, response.json()["code"]) == (status, code), response.content
    assert (multipart.status_code, multipart.json()["code"]) == (status, code)
    assert response.json()["detail"] == multipart.json()["detail"]
    assert bucket_keys(s3) == []
    assert nothing_accepted(org)
    # The upload stays open: completing again finds nothing to complete.
    assert complete(api, grant["upload_id"]).json()["code"] == "upload_missing"


def test_a_refused_file_can_be_replaced_through_the_same_url_and_completed(s3, api, org):
    pdf = make_pdf(4)
    grant = granted(api, pdf)
    assert put(grant, HTML_AS_PDF.ljust(len(pdf), b" ")).status_code == 200
    assert complete(api, grant["upload_id"]).status_code == 415

    assert put(grant, pdf).status_code == 200
    response = complete(api, grant["upload_id"])

    assert response.status_code == 202, response.content
    org.refresh_from_db()
    assert org.pages_reserved == 4


def test_a_file_of_another_kind_than_declared_is_415_type_mismatch(s3, api, org):
    docx = make_docx(3)
    grant = put_for(api, docx, filename="minutes.pdf")

    response = complete(api, grant["upload_id"])

    assert response.status_code == 415, response.content
    assert response.json()["code"] == "type_mismatch"
    assert bucket_keys(s3) == []
    assert nothing_accepted(org)


def test_over_quota_at_completion_keeps_the_file_to_complete_once_pages_are_free(s3, api, org):
    grant = put_for(api, make_pdf(5))
    org.page_limit = 3
    org.save(update_fields=["page_limit"])

    refused = complete(api, grant["upload_id"])

    assert refused.status_code == 402, refused.content
    assert refused.json()["pages_requested"] == 5
    assert len(bucket_keys(s3)) == 1 and nothing_accepted(org)
    org.page_limit = 10
    org.save(update_fields=["page_limit"])
    assert complete(api, grant["upload_id"]).status_code == 202


@pytest.mark.slow
def test_storage_that_does_not_answer_at_completion_is_503_and_keeps_the_upload(
    s3, api, org, settings
):
    grant = put_for(api, make_pdf(1))
    endpoint = settings.AWS_S3_ENDPOINT_URL
    with silent_server() as port:
        settings.AWS_S3_ENDPOINT_URL = f"http://127.0.0.1:{port}"
        settings.AWS_S3_CLIENT_CONFIG = Config(
            connect_timeout=0.5, read_timeout=0.5, retries={"max_attempts": 1}
        )
        storage_reopened(settings)

        response = complete(api, grant["upload_id"])

    assert response.status_code == 503, response.content
    assert response.json()["code"] == "storage_unavailable" and response["Retry-After"] == "60"
    assert nothing_accepted(org)
    settings.AWS_S3_ENDPOINT_URL = endpoint
    storage_reopened(settings)
    assert complete(api, grant["upload_id"]).status_code == 202


# --- Uploads never completed -------------------------------------------------------------


def expire(grant: dict) -> None:
    PendingUpload.objects.filter(id=grant["upload_id"]).update(
        complete_by=timezone.now() - timedelta(seconds=1)
    )


@pytest.mark.django_db(transaction=True)
def test_the_sweeper_removes_an_expired_upload_with_its_object_and_leaves_open_ones(s3, api):
    expired = put_for(api, make_pdf(1))
    expired_key = PendingUpload.objects.get(id=expired["upload_id"]).storage_key
    open_ = put_for(api, make_pdf(1))
    open_key = PendingUpload.objects.get(id=open_["upload_id"]).storage_key
    expire(expired)

    report = sweep_once()

    assert report.uploads_expired == 1
    assert list(PendingUpload.objects.values_list("id", flat=True)) == [
        uuid.UUID(open_["upload_id"])
    ]
    assert bucket_keys(s3) == [open_key]
    assert expired_key not in bucket_keys(s3)
    assert complete(api, expired["upload_id"]).status_code == 404


@pytest.mark.django_db(transaction=True)
def test_the_sweeper_removes_a_completed_uploads_row_but_never_its_documents_object(s3, api):
    grant = put_for(api, make_pdf(1))
    document_id = complete(api, grant["upload_id"]).json()["document_id"]
    expire(grant)

    assert sweep_once().uploads_expired == 1

    assert not PendingUpload.objects.exists()
    assert bucket_keys(s3) == [Document.objects.get(id=document_id).storage_key]


@pytest.mark.django_db(transaction=True)
def test_the_orphan_pass_leaves_an_open_uploads_object_to_the_upload(s3, api, monkeypatch):
    monkeypatch.setattr(sweeper, "ORPHAN_GRACE_SECONDS", 0)
    grant = put_for(api, make_pdf(1))
    key = PendingUpload.objects.get(id=grant["upload_id"]).storage_key

    assert sweep_once(housekeeping=True).orphans_removed == 0
    assert bucket_keys(s3) == [key]
    assert complete(api, grant["upload_id"]).status_code == 202


def test_completing_again_after_the_document_was_deleted_is_a_409(s3, api, org):
    grant = put_for(api, make_pdf(2))
    accepted = complete(api, grant["upload_id"]).json()
    assert api.delete(f"/api/v1/documents/{accepted['document_id']}").status_code == 204

    again = complete(api, grant["upload_id"])

    assert (again.status_code, again.json()["code"]) == (409, "document_deleted")


def test_a_refusal_racing_a_completion_that_was_accepted_leaves_its_bytes(
    s3, api, org, monkeypatch
):
    grant = put_for(api, make_pdf(2))
    accept = presigned_service.pending_upload_accept

    def accepted_elsewhere_then_refused(**kwargs):
        accept(**kwargs)  # the other completion, committed meanwhile
        raise UnreadableDocument("The inspection ran out of time.", code="inspection_too_slow")

    monkeypatch.setattr(presigned_service, "pending_upload_accept", accepted_elsewhere_then_refused)

    response = complete(api, grant["upload_id"])

    assert response.status_code == 422
    document = Document.objects.get(organisation=org)
    assert bucket_keys(s3) == [document.storage_key]  # the accepted document's bytes stay


# --- Two completions at once, one refused: the timing forced with row locks -------------


def _lock_waits(watcher) -> int:
    query = (
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    return watcher.execute(query).fetchone()[0]


def _completer(org):
    """complete(), callable from a thread of its own (its own client and connection)."""
    _, raw = api_token_create(organisation=org, name="racing")

    def completion(upload_id: str):
        try:
            return complete(Client(HTTP_AUTHORIZATION=f"Bearer {raw}"), upload_id)
        finally:
            connections.close_all()

    return completion


@pytest.mark.django_db(transaction=True)
def test_a_refusal_racing_an_accepting_completion_waits_for_it_and_leaves_its_bytes(
    s3, api, org, settings
):
    grant = put_for(api, make_pdf(2))
    key = PendingUpload.objects.get(id=grant["upload_id"]).storage_key
    completion = _completer(org)
    with (
        another_connection() as holder,
        another_connection(autocommit=True) as watcher,
        ThreadPoolExecutor(2) as pool,
    ):
        # As another upload's accept transaction would: the accepting completion marks the
        # upload completed, then waits for the organisation's row to take its pages.
        holder.execute(
            "SELECT 1 FROM documents_organisation WHERE id = %s FOR NO KEY UPDATE", [org.id]
        )
        accepting = pool.submit(completion, grant["upload_id"])
        wait_for(lambda: _lock_waits(watcher) == 1, timeout=20, what="the acceptance to wait")
        # The same bytes, refused by the second completion (a limit lowered meanwhile).
        settings.PAPERLANE_MAX_PAGES_PER_DOCUMENT = 1
        refused = pool.submit(completion, grant["upload_id"])
        wait_for(
            lambda: refused.done() or _lock_waits(watcher) == 2,
            timeout=20,
            what="the refusal to wait for the upload's row",
        )
        holder.commit()
        accepted, refused = accepting.result(), refused.result()

    assert accepted.status_code == 202, accepted.content
    assert (refused.status_code, refused.json()["code"]) == (422, "too_many_pages")
    document = Document.objects.get(id=accepted.json()["document_id"])
    assert document.storage_key == key
    assert bucket_keys(s3) == [key]  # the accepted document's bytes stay


class _RolledBack(Exception):
    pass


def _hold_document_id(document_id, org, *, held: threading.Event, release: threading.Event):
    """Write a document under `document_id` and hold it, uncommitted, until `release`:
    another insert of that id waits for this transaction, which then rolls back."""
    try:
        with transaction.atomic():
            Document.objects.create(
                id=document_id,
                organisation=org,
                filename="holder.pdf",
                kind="pdf",
                size_bytes=1,
                sha256="0" * 64,
                storage_key=f"holder/{document_id}.pdf",
            )
            held.set()
            release.wait(30)
            raise _RolledBack()
    except _RolledBack:
        pass
    finally:
        connections.close_all()


@pytest.mark.django_db(transaction=True)
def test_a_completion_whose_bytes_a_refusal_deleted_first_makes_no_document(s3, api, org, settings):
    data = make_pdf(2)
    grant = put_for(api, data)
    pending = PendingUpload.objects.get(id=grant["upload_id"])
    completion = _completer(org)
    held, release = threading.Event(), threading.Event()
    with (
        another_connection(autocommit=True) as watcher,
        ThreadPoolExecutor(2) as pool,
    ):
        # The accepting completion has read and checked the bytes, and waits to write its
        # document (its id is held) before it has marked the upload.
        holding = pool.submit(
            _hold_document_id, pending.reserved_document_id, org, held=held, release=release
        )
        assert held.wait(20)
        accepting = pool.submit(completion, grant["upload_id"])
        wait_for(lambda: _lock_waits(watcher) == 1, timeout=20, what="the acceptance to wait")
        settings.PAPERLANE_MAX_PAGES_PER_DOCUMENT = 1
        refused = completion(grant["upload_id"])  # refused, and its bytes deleted
        assert (refused.status_code, refused.json()["code"]) == (422, "too_many_pages")
        assert bucket_keys(s3) == []
        release.set()
        holding.result()
        late = accepting.result()

    assert (late.status_code, late.json()["code"]) == (409, "upload_missing"), late.content
    assert nothing_accepted(org)
    assert PendingUpload.objects.get(id=grant["upload_id"]).completed_at is None
    # The upload is still open: the file PUT again is accepted.
    settings.PAPERLANE_MAX_PAGES_PER_DOCUMENT = 5000
    assert put(grant, data).status_code == 200
    assert complete(api, grant["upload_id"]).status_code == 202
