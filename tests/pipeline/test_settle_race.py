"""A cancel racing settle leaves nothing half done: settle wins (the run succeeded, is
charged and found; the cancel is a 409) or the cancel wins (the run is cancelled, its
pages given back, nothing of it found or charged). A real settle worker process, and
the order they meet forced with a row lock held from another connection."""

import threading

import pytest
from django.db import connection
from django.test import Client

from documents.models import Chunk, Document, QuotaReservation, UsageEntry
from pipeline.dispatch import enqueue_current
from pipeline.engine import execute_stage
from pipeline.models import ImportRun, StageAttempt
from tests.support.files import make_pdf
from tests.support.locks import RowLock
from tests.support.processes import process_env, stage_worker_process
from tests.support.uploads import accepted_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# The queries each side waits in (as PostgreSQL shows their first 1 kB): settle's worker
# claiming the run, or completing (locking the reservation it charges), and the cancel
# locking the run.
CLAIMING = "%WITH old AS (%"
CHARGING = '%FROM "documents_quotareservation" t %FOR UPDATE OF t%'
CANCELLING = 'SELECT "jobs_importrun"."id"%'


def at_settle(api) -> ImportRun:
    run = accepted_run(api, make_pdf(2, label="Tide table"))
    for stage in ("extract", "embed"):
        assert execute_stage(str(run.id), stage)["outcome"] == "succeeded"
    run = ImportRun.objects.select_related("reservation").get(id=run.id)
    assert run.stage == "settle" and Chunk.objects.filter(document=run.document_id).exists()
    return run


def cancel_in_a_thread(api: Client, run: ImportRun) -> tuple[threading.Thread, list]:
    answers = []

    def cancel():
        try:
            answers.append(api.post(f"/api/v1/runs/{run.id}/cancel"))
        finally:
            connection.close()

    thread = threading.Thread(target=cancel)
    thread.start()
    return thread, answers


def found(api, words: str) -> list[str]:
    return [hit["document_id"] for hit in api.get("/api/v1/search", {"q": words}).json()["results"]]


def test_settle_holding_the_run_first_wins_and_the_cancel_is_refused(api, org):
    run = at_settle(api)
    with RowLock() as hold:
        # Settle's completion locks the run, then waits on the reservation it charges.
        hold.lock(
            "SELECT id FROM documents_quotareservation WHERE id = %s FOR UPDATE",
            [run.reservation_id],
        )
        enqueue_current(run)
        with stage_worker_process("settle", env=process_env(), burst=True) as worker:
            hold.wait_for_waiters(1, like=CHARGING)
            thread, answers = cancel_in_a_thread(api, run)
            hold.wait_for_waiters(1, like=CANCELLING)  # queued behind settle on the run

            hold.release()
            thread.join(30)
            assert worker.wait(30) == 0

    [answer] = answers
    assert answer.status_code == 409 and "already ended (succeeded)" in answer.json()["detail"]
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert [e.pages for e in UsageEntry.objects.filter(document=run.document_id)] == [2]
    assert QuotaReservation.objects.get(id=run.reservation_id).status == "settled"
    document = Document.objects.get(id=run.document_id)
    assert document.searchable_version == 1 and document.chunk_count > 0
    assert found(api, "tide table") == [str(document.id)]
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (2, 0)


def test_the_cancel_holding_the_run_first_wins_and_settle_writes_nothing(api, org):
    run = at_settle(api)
    with RowLock() as hold:
        hold.lock("SELECT id FROM jobs_importrun WHERE id = %s FOR UPDATE", [run.id])
        enqueue_current(run)
        with stage_worker_process("settle", env=process_env(), burst=True) as worker:
            # The worker's claim queues on the run first, the cancel behind it: the claim
            # takes the stage, then the cancel takes the run before settle can complete.
            hold.wait_for_waiters(1, like=CLAIMING)
            thread, answers = cancel_in_a_thread(api, run)
            hold.wait_for_waiters(1, like=CANCELLING)

            hold.release()
            thread.join(30)
            assert worker.wait(30) == 0

    [answer] = answers
    assert answer.status_code == 200, answer.content
    run.refresh_from_db()
    assert run.status == "cancelled"
    # Settle had claimed the stage and lost its hold before it could charge.
    [settle] = StageAttempt.objects.filter(run=run, stage="settle")
    assert settle.outcome != "succeeded"
    assert not UsageEntry.objects.filter(document=run.document_id).exists()
    assert QuotaReservation.objects.get(id=run.reservation_id).status == "released"
    document = Document.objects.get(id=run.document_id)
    assert (document.searchable_version, document.chunk_count) == (None, 0)
    assert not Chunk.objects.filter(document=document).exists()
    assert found(api, "tide table") == []
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (0, 0)
