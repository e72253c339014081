"""DELETE /documents/{id}: the record stays for the books, everything else of it goes."""

from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from documents.models import Chunk, Document, DocumentText, QuotaReservation, UsageEntry
from documents.services.orphans import stored_orphans_remove
from pipeline.engine import execute_stage
from pipeline.models import ImportRun, RunTransition, StageAttempt
from tests.support.files import make_pdf
from tests.support.runs import drive
from tests.support.storage import storage_exists
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)


def url(document_id) -> str:
    return f"/api/v1/documents/{document_id}"


def test_a_processed_document_is_deleted_and_gone_from_every_answer(api, org, media_files):
    run = drive(accepted_run(api, make_pdf(3, words_per_page=300), name="report.pdf").id)
    document_id = run.document_id
    assert run.status == "succeeded" and Chunk.objects.filter(document=document_id).exists()

    response = api.delete(url(document_id))

    assert response.status_code == 204 and response.content == b""
    assert api.get(url(document_id)).status_code == 404
    assert api.get(f"{url(document_id)}/file").status_code == 404
    assert api.get("/api/v1/documents").json() == {
        "items": [],
        "count": 0,
        "limit": 50,
        "offset": 0,
    }
    again = api.delete(url(document_id))
    assert again.status_code == 404 and again.json()["code"] == "not_found"
    # Content gone: text, chunks, the stored file.
    assert not Chunk.objects.filter(document=document_id).exists()
    assert not DocumentText.objects.filter(document=document_id).exists()
    assert media_files() == []
    # The books stay: the row, who deleted it, the run with its attempts and history, the
    # charge (the pages were processed).
    document = Document.objects.get(id=document_id)
    assert document.deleted_at is not None and document.deleted_by.startswith("api-token:pl_")
    assert (document.chunk_count, document.text_chars, document.page_count) == (0, 0, 3)
    assert ImportRun.objects.get(id=run.id).status == "succeeded"
    assert StageAttempt.objects.filter(run=run).count() == 3
    assert [e.pages for e in UsageEntry.objects.filter(document=document_id)] == [3]
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (3, 0)


def test_another_organisations_document_is_the_same_404_as_an_unknown_one(api, other_api):
    run = accepted_run(api, make_pdf(1))

    theirs = other_api.delete(url(run.document_id))
    unknown = other_api.delete(url("00000000-0000-0000-0000-000000000000"))

    assert theirs.status_code == unknown.status_code == 404
    assert theirs.json() == unknown.json() == {"detail": "Document not found.", "code": "not_found"}
    assert Document.objects.get(id=run.document_id).deleted_at is None
    assert ImportRun.objects.get(id=run.id).status == "queued"
    assert storage_exists(key=run.document.storage_key)


def test_a_document_in_the_pipeline_has_its_run_cancelled_and_held_pages_given_back(api, org):
    run = accepted_run(api, make_pdf(4))
    org.refresh_from_db()
    assert org.pages_reserved == 4

    assert api.delete(url(run.document_id)).status_code == 204

    run.refresh_from_db()
    assert run.status == "cancelled"
    cancelled = RunTransition.objects.filter(run=run, to_status="cancelled").get()
    assert cancelled.actor_label.startswith("api-token:") and "deleted" in cancelled.reason
    assert QuotaReservation.objects.get(run=run).status == "released"
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (0, 0)
    # Its stage job, still in Redis, finds nothing to do.
    assert execute_stage(str(run.id), "extract")["outcome"] == "skipped"
    assert not DocumentText.objects.filter(document=run.document_id).exists()


def test_a_deleted_documents_run_cannot_be_retried(api, org):
    run = accepted_run(api, make_pdf(2))
    api.post(f"/api/v1/runs/{run.id}/cancel")
    api.delete(url(run.document_id))

    response = api.post(f"/api/v1/runs/{run.id}/retry")

    assert response.status_code == 409
    assert response.json()["code"] == "document_deleted"
    assert ImportRun.objects.get(id=run.id).status == "cancelled"
    org.refresh_from_db()
    assert org.pages_reserved == 0


def test_pages_an_ended_run_still_held_are_given_back(api, org):
    run = accepted_run(api, make_pdf(2))
    # A worker that died after recording the failure but before giving the pages back.
    ImportRun.objects.filter(id=run.id).update(status="failed", due_at=None)

    assert api.delete(url(run.document_id)).status_code == 204

    assert QuotaReservation.objects.get(run=run).status == "released"
    org.refresh_from_db()
    assert org.pages_reserved == 0


def test_files_the_store_refused_to_delete_are_removed_by_the_orphan_sweep(
    api, monkeypatch, media_files
):
    kept = accepted_run(api, make_pdf(1), name="kept.pdf").document
    deleted = accepted_run(api, make_pdf(1), name="deleted.pdf").document

    def refuse(*, key):
        raise OSError("read-only file system")

    monkeypatch.setattr("documents.services.removal.storage_delete", refuse)
    assert api.delete(url(deleted.id)).status_code == 204
    assert sorted(media_files()) == sorted([kept.storage_key, deleted.storage_key])
    monkeypatch.undo()

    swept = stored_orphans_remove(
        older_than=timezone.now() + timedelta(seconds=5), limit=100, examine=1000
    )

    assert swept.removed == 1
    assert media_files() == [kept.storage_key]


def test_a_document_stored_in_s3_is_removed_from_the_bucket(s3, api):
    kept = accepted_run(api, make_pdf(1), name="kept.pdf").document
    deleted = accepted_run(api, make_pdf(1), name="deleted.pdf").document

    assert api.delete(url(deleted.id)).status_code == 204

    listing = s3.client.list_objects_v2(Bucket=s3.bucket)
    assert [entry["Key"] for entry in listing["Contents"]] == [kept.storage_key]


def test_the_same_upload_sent_again_after_its_document_was_deleted_is_a_409(api):
    data = make_pdf(2)
    first = api.post(
        "/api/v1/documents",
        {"file": SimpleUploadedFile("a.pdf", data)},
        HTTP_IDEMPOTENCY_KEY="upload-7",
    )
    assert api.delete(url(first.json()["document_id"])).status_code == 204

    again = api.post(
        "/api/v1/documents",
        {"file": SimpleUploadedFile("a.pdf", data)},
        HTTP_IDEMPOTENCY_KEY="upload-7",
    )

    assert (again.status_code, again.json()["code"]) == (409, "document_deleted")
