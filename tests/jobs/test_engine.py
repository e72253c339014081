"""The stage engine in the test process: claims, outcomes, cancel and retry."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db.models import F

from documents.models import Chunk, QuotaReservation, UsageEntry
from jobs.dispatch import stage_job_id
from jobs.engine import execute_stage
from jobs.models import ImportRun, RunTransition, StageAttempt
from jobs.queues import get_queue
from tests.support.files import make_damaged_pdf, make_docx, make_encrypted_pdf, make_pdf
from tests.support.runs import drive, unchecked_run

pytestmark = pytest.mark.django_db(transaction=True)


def upload(api, data: bytes, name: str = "doc.pdf") -> ImportRun:
    response = api.post("/api/v1/documents", {"file": SimpleUploadedFile(name, data)})
    assert response.status_code == 202, response.content
    return ImportRun.objects.get(id=response.json()["run_id"])


def test_the_same_stage_delivered_twice_does_its_work_once(api):
    run = upload(api, make_pdf(2))

    assert execute_stage(str(run.id), "create")["outcome"] == "succeeded"
    assert execute_stage(str(run.id), "create")["outcome"] == "skipped"
    for stage in ("store", "extract", "embed", "settle"):
        assert execute_stage(str(run.id), stage)["outcome"] == "succeeded"
    assert execute_stage(str(run.id), "embed")["outcome"] == "skipped"
    assert execute_stage(str(run.id), "settle")["outcome"] == "skipped"

    assert StageAttempt.objects.filter(run=run).count() == 5
    assert UsageEntry.objects.filter(document=run.document_id).count() == 1


def test_a_stage_that_is_not_due_yet_is_not_claimed(api):
    run = upload(api, make_pdf(1))

    assert execute_stage(str(run.id), "extract")["outcome"] == "skipped"
    assert not StageAttempt.objects.filter(run=run).exists()


def test_the_history_records_every_transition(api):
    run = drive(upload(api, make_pdf(1)).id)

    history = list(RunTransition.objects.filter(run=run).values_list("to_status", "to_stage"))
    assert history == [
        ("queued", "create"),
        ("processing", "create"),
        ("processing", "store"),
        ("processing", "extract"),
        ("processing", "embed"),
        ("processing", "settle"),
        ("succeeded", "settle"),
    ]


def test_re_running_embed_overwrites_chunks_instead_of_adding(api):
    run = drive(upload(api, make_pdf(6, words_per_page=300)).id)
    before = list(Chunk.objects.filter(document=run.document_id).values_list("id", "index"))
    # As an operator's retry from embed would: a new generation of the same run.
    ImportRun.objects.filter(id=run.id).update(
        status="processing", stage="embed", generation=F("generation") + 1
    )

    execute_stage(str(run.id), "embed")

    after = list(Chunk.objects.filter(document=run.document_id).values_list("id", "index"))
    assert sorted(after) == sorted(before) and len(before) > 1


@pytest.mark.parametrize(
    ("data", "message"),
    [(make_damaged_pdf(3), "damaged"), (make_encrypted_pdf(3), "password")],
    ids=["damaged", "encrypted"],
)
def test_unreadable_pdfs_fail_after_one_attempt_with_a_readable_error(org, api, data, message):
    run = drive(unchecked_run(org, data, kind="pdf", pages=3).id)

    assert run.status == "failed"
    assert message in run.error_message
    attempts = list(StageAttempt.objects.filter(run=run, stage="extract"))
    assert [a.outcome for a in attempts] == ["permanent_error"]
    assert QuotaReservation.objects.get(run=run).status == "released"
    body = api.get(f"/api/v1/runs/{run.id}").json()
    assert body["status"] == "failed"
    assert body["error"]["code"] == "unreadable_document"
    assert message in body["error"]["message"]


def test_a_changed_stored_file_is_a_permanent_error(org, api):
    from documents.storage import storage_delete

    run = upload(api, make_pdf(1))
    storage_delete(key=run.document.storage_key)

    run = drive(run.id)

    assert run.status == "failed"
    assert "no longer in storage" in run.error_message


def test_settle_corrects_a_docx_estimate_to_the_extracted_count(api, org):
    run = upload(api, make_docx(3, pages_property=2), name="notes.docx")
    assert run.reservation.pages == 2

    run = drive(run.id)

    assert run.status == "succeeded"
    assert UsageEntry.objects.get(document=run.document_id).pages == 2
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (2, 0)


def test_cancel_stops_a_queued_run_and_releases_its_pages(api, org):
    run = upload(api, make_pdf(4))

    response = api.post(f"/api/v1/runs/{run.id}/cancel")

    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert execute_stage(str(run.id), "create")["outcome"] == "skipped"
    org.refresh_from_db()
    assert org.pages_reserved == 0
    again = api.post(f"/api/v1/runs/{run.id}/cancel")
    assert again.status_code == 200


def test_an_ended_run_cannot_be_cancelled(api):
    run = drive(upload(api, make_pdf(1)).id)

    response = api.post(f"/api/v1/runs/{run.id}/cancel")

    assert response.status_code == 409
    assert "already ended" in response.json()["detail"]


def test_retry_resumes_a_cancelled_run_and_holds_its_pages_again(api, org):
    run = upload(api, make_pdf(3))
    api.post(f"/api/v1/runs/{run.id}/cancel")

    response = api.post(f"/api/v1/runs/{run.id}/retry")

    assert response.status_code == 200
    assert response.json()["status"] == "queued"
    org.refresh_from_db()
    assert org.pages_reserved == 3
    assert drive(run.id).status == "succeeded"
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (3, 0)


def test_retry_is_refused_when_the_pages_no_longer_fit(api, org):
    run = upload(api, make_pdf(3))
    api.post(f"/api/v1/runs/{run.id}/cancel")
    org.page_limit = 2
    org.save(update_fields=["page_limit"])

    response = api.post(f"/api/v1/runs/{run.id}/retry")

    assert response.status_code == 402
    assert ImportRun.objects.get(id=run.id).status == "cancelled"


def test_another_organisation_cannot_cancel_or_retry(api, other_api):
    run = upload(api, make_pdf(1))

    assert other_api.post(f"/api/v1/runs/{run.id}/cancel").status_code == 404
    assert other_api.post(f"/api/v1/runs/{run.id}/retry").status_code == 404
    assert ImportRun.objects.get(id=run.id).status == "queued"


def test_an_operator_retry_of_a_dead_letter_run_finishes_it(api, org, settings):
    settings.PAPERLANE_EMBEDDER = "tests.support.embedders.AlwaysBusyEmbedder"
    settings.PAPERLANE_RETRY_MAX_ATTEMPTS = 1
    run = drive(upload(api, make_pdf(2)).id)
    assert run.status == "dead_letter"
    org.refresh_from_db()
    assert org.pages_reserved == 0

    settings.PAPERLANE_EMBEDDER = "jobs.embedding.HashingEmbedder"
    assert api.post(f"/api/v1/runs/{run.id}/retry").status_code == 200
    # A new generation: the delivery gets a job id RQ has not seen for this run.
    assert get_queue("embed").job_ids[-1] == stage_job_id(
        run_id=run.id, stage="embed", attempt=0, generation=1
    )
    run = drive(run.id)

    assert run.status == "succeeded"
    embed = StageAttempt.objects.filter(run=run, stage="embed").order_by("started_at")
    assert [(a.generation, a.number, a.outcome) for a in embed] == [
        (0, 1, "transient_error"),
        (1, 1, "succeeded"),
    ]
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (2, 0)


def test_cancelling_a_run_mid_stage_closes_its_running_attempt(api):
    from jobs.services import run_cancel, run_claim

    run = upload(api, make_pdf(1))
    claim = run_claim(run_id=run.id, stage="create", job_id="job-1", worker="host.1.create")

    run_cancel(run=run, actor=None, actor_label="test")

    attempt = StageAttempt.objects.get(id=claim.attempt.id)
    assert (attempt.outcome, attempt.error_message) == ("skipped", "the run was cancelled")
