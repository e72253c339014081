"""The stage engine in the test process: claims, duplicate deliveries, the history."""

import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from documents.models import Chunk, UsageEntry
from pipeline import engine
from pipeline.dispatch import on_stage_job_success, stage_job_id
from pipeline.engine import execute_stage
from pipeline.errors import LeaseLost
from pipeline.models import ImportRun, RunSource, RunTransition, StageAttempt
from pipeline.services.people import run_cancel
from pipeline.services.transitions import Actor
from pipeline.services.workers import (
    run_claim,
    run_complete_stage,
    run_record_lost_hold,
    run_release,
)
from pipeline.stage_list import first_stage, next_stage
from tests.support.files import make_pdf
from tests.support.lanes import lane_of, waiting_job_ids
from tests.support.locks import another_connection
from tests.support.runs import drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)

# An upload's first stage (its bytes are stored at accept) and the one after it.
FIRST = first_stage(RunSource.API)
SECOND = next_stage(FIRST, source=RunSource.API)

# The history of an upload that went through its stages and succeeded (releasing and
# retaking a stage, as one test does, adds no row).
SUCCEEDED_HISTORY = [
    ("queued", "extract"),
    ("processing", "extract"),
    ("processing", "embed"),
    ("processing", "settle"),
    ("succeeded", "settle"),
]


def transitions(run) -> list[tuple[str, str]]:
    """(to_status, to_stage) of each of the run's history rows, oldest first."""
    return list(RunTransition.objects.filter(run=run).values_list("to_status", "to_stage"))


def test_the_same_stage_delivered_twice_does_its_work_once(api):
    run = accepted_run(api, make_pdf(2))

    assert execute_stage(str(run.id), "extract")["outcome"] == "succeeded"
    assert execute_stage(str(run.id), "extract")["outcome"] == "skipped"
    for stage in ("embed", "settle"):
        assert execute_stage(str(run.id), stage)["outcome"] == "succeeded"
    assert execute_stage(str(run.id), "embed")["outcome"] == "skipped"
    assert execute_stage(str(run.id), "settle")["outcome"] == "skipped"

    assert StageAttempt.objects.filter(run=run).count() == 3
    assert UsageEntry.objects.filter(document=run.document_id).count() == 1


def test_a_stage_that_is_not_due_yet_is_not_claimed(api):
    run = accepted_run(api, make_pdf(1))

    assert execute_stage(str(run.id), SECOND)["outcome"] == "skipped"
    assert not StageAttempt.objects.filter(run=run).exists()


def test_the_history_records_every_transition(api):
    run = drive(accepted_run(api, make_pdf(1)).id)

    assert transitions(run) == SUCCEEDED_HISTORY


def test_a_cancel_leaves_a_live_workers_attempt_to_it_and_closes_a_silent_ones(api):
    live, silent = accepted_run(api, make_pdf(1)), accepted_run(api, make_pdf(1))
    held = run_claim(run_id=live.id, stage=FIRST, job_id="job-1", worker=f"host.1.{FIRST}")
    lost = run_claim(run_id=silent.id, stage=FIRST, job_id="job-2", worker=f"host.2.{FIRST}")
    ImportRun.objects.filter(id=silent.id).update(lease_expires_at=timezone.now())

    for run in (live, silent):
        run_cancel(run=run, actor=Actor("user:alice"))

    # The worker holding its lease is still at it: it says how it ended when it stops.
    assert StageAttempt.objects.get(id=held.attempt.id).outcome == "running"
    assert run_record_lost_hold(claim=held) == "stopped"
    attempt = StageAttempt.objects.get(id=held.attempt.id)
    assert attempt.finished_at is not None
    assert "cancelled by user:alice (cancelled)" in attempt.error_message
    # One whose lease had expired stopped answering: nobody else will close it.
    attempt = StageAttempt.objects.get(id=lost.attempt.id)
    assert (attempt.outcome, attempt.error_code) == ("abandoned", "worker_lost")


def test_an_upload_has_no_create_or_store_attempt_and_still_succeeds(api):
    run = drive(accepted_run(api, make_pdf(2)).id)

    assert run.status == "succeeded", run.error_message
    attempts = list(StageAttempt.objects.filter(run=run).values_list("stage", "outcome"))
    assert attempts == [(s, "succeeded") for s in ("extract", "embed", "settle")]
    assert UsageEntry.objects.filter(document=run.document_id).count() == 1


def test_the_claim_drops_a_duplicate_delivery(api):
    run = accepted_run(api, make_pdf(1))

    first = run_claim(run_id=run.id, stage=FIRST, job_id="job-1", worker=f"host.1.{FIRST}")
    again = run_claim(run_id=run.id, stage=FIRST, job_id="job-1", worker=f"host.2.{FIRST}")
    other = run_claim(run_id=run.id, stage=FIRST, job_id="job-2", worker=f"host.2.{FIRST}")

    assert first is not None and again is None and other is None
    assert StageAttempt.objects.filter(run=run).count() == 1
    assert ImportRun.objects.get(id=run.id).lease_owner == f"job-1@host.1.{FIRST}"


def test_the_claim_loads_what_the_stage_needs_and_records_its_attempt(
    api, django_assert_num_queries
):
    run = accepted_run(api, make_pdf(1))

    claim = run_claim(run_id=run.id, stage=FIRST, job_id="job-1", worker=f"host.1.{FIRST}")

    with django_assert_num_queries(0):
        loaded = (claim.run.document.sha256, claim.run.reservation.pages, claim.run.source)
    assert loaded == (run.document.sha256, run.reservation.pages, "api")
    assert (claim.run.status, claim.run.stage_attempts, claim.run.total_attempts) == (
        "processing",
        1,
        1,
    )
    stored = StageAttempt.objects.get(id=claim.attempt.id)
    assert (stored.stage, stored.number, stored.job_id, stored.outcome) == (
        FIRST,
        1,
        "job-1",
        "running",
    )


def test_only_a_queued_run_starting_is_written_to_the_history(api, settings):
    settings.PAPERLANE_RETRY_BASE_SECONDS = 0
    run = accepted_run(api, make_pdf(1))
    claim = run_claim(run_id=run.id, stage=FIRST, job_id="job-1", worker=f"host.1.{FIRST}")
    # A retry claims the run while it is processing: no second "started" row.
    run_release(claim=claim, reason="worker stopped")
    run_claim(run_id=run.id, stage=FIRST, job_id="job-2", worker=f"host.1.{FIRST}")

    started = RunTransition.objects.filter(run=run, to_status="processing")
    assert list(started.values_list("from_status", "reason")) == [("queued", f"{FIRST} started")]


def test_completing_a_stage_no_longer_held_changes_nothing(api):
    run = accepted_run(api, make_pdf(1))
    claim = run_claim(run_id=run.id, stage=FIRST, job_id="job-1", worker=f"host.1.{FIRST}")
    ImportRun.objects.filter(id=run.id).update(lease_owner=f"job-9@host.9.{FIRST}")
    transitions = RunTransition.objects.filter(run=run).count()

    with pytest.raises(LeaseLost):
        run_complete_stage(claim=claim)

    assert ImportRun.objects.get(id=run.id).stage == FIRST
    assert StageAttempt.objects.get(id=claim.attempt.id).outcome == "running"
    assert RunTransition.objects.filter(run=run).count() == transitions


def test_the_engine_hands_the_next_stage_to_its_callback_once_it_has_committed(api, redis_conn):
    run = accepted_run(api, make_pdf(1))

    result = execute_stage(str(run.id), "extract")

    assert result["next"]["stage"] == "embed"
    assert waiting_job_ids("embed") == []  # the job's on_success callback enqueues it
    on_stage_job_success(None, redis_conn, result)
    assert waiting_job_ids("embed") == [stage_job_id(run_id=run.id, stage="embed", attempt=0)]
    job = lane_of(waiting_job_ids("embed")[0]).fetch_job(waiting_job_ids("embed")[0])
    assert job.args == (str(run.id), "embed") and job.success_callback is on_stage_job_success


def progress_writes(statements: list[str]) -> int:
    return sum(1 for sql in statements if sql.startswith('UPDATE "jobs_importrun" SET "progress'))


def test_a_short_stage_writes_no_progress_and_a_long_one_does(api, settings, monkeypatch):
    # Intervals far from the stages' times, so that a busy machine cannot blur them.
    monkeypatch.setattr(engine, "PROGRESS_INTERVAL", 60)
    run = accepted_run(api, make_pdf(1))
    with CaptureQueriesContext(connection) as short:
        assert execute_stage(str(run.id), "extract")["outcome"] == "succeeded"
    # Read now: the next request through the test client resets the query log.
    short_writes = progress_writes([q["sql"] for q in short.captured_queries])
    settings.PAPERLANE_EMBEDDER = "tests.support.embedders.SlowEmbedder"
    settings.PAPERLANE_EMBED_BATCH_SIZE = 1
    monkeypatch.setenv("EMBED_DELAY", "0.3")
    monkeypatch.setattr(engine, "PROGRESS_INTERVAL", 0.1)
    slow = accepted_run(api, make_pdf(3, words_per_page=300))
    assert execute_stage(str(slow.id), "extract")["outcome"] == "succeeded"
    with CaptureQueriesContext(connection) as long:
        assert execute_stage(str(slow.id), "embed")["outcome"] == "succeeded"

    assert short_writes == 0
    # The chunks are stored (not yet searchable: that waits for settle).
    batches = Chunk.objects.filter(document=slow.document_id).count()
    assert batches >= 3
    assert progress_writes([q["sql"] for q in long.captured_queries]) >= batches - 1


def test_a_stage_given_back_is_claimed_again_and_the_books_show_both_tries(api):
    run = accepted_run(api, make_pdf(1))
    claim = run_claim(run_id=run.id, stage=FIRST, job_id="job-1", worker=f"host.1.{FIRST}")
    assert run_claim(run_id=run.id, stage=FIRST, job_id="job-1", worker=f"host.2.{FIRST}") is None
    assert claim.run.document.sha256 == run.document.sha256
    run_release(claim=claim, reason="worker stopped")

    run = drive(run.id)

    assert run.status == "succeeded", run.error_message
    attempts = list(StageAttempt.objects.filter(run=run).values_list("stage", "outcome"))
    assert attempts == [
        ("extract", "abandoned"),
        *[(s, "succeeded") for s in ("extract", "embed", "settle")],
    ]
    assert transitions(run) == SUCCEEDED_HISTORY


def test_a_stage_completes_nothing_without_the_hold(api):
    run = accepted_run(api, make_pdf(1))
    claim = run_claim(run_id=run.id, stage=FIRST, job_id="job-1", worker=f"host.1.{FIRST}")
    ImportRun.objects.filter(id=run.id).update(lease_owner=f"job-9@host.9.{FIRST}")

    with pytest.raises(LeaseLost):
        run_complete_stage(claim=claim)

    assert ImportRun.objects.get(id=run.id).stage == FIRST
    assert StageAttempt.objects.get(id=claim.attempt.id).outcome == "running"


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def test_a_connection_the_server_dropped_between_two_jobs_is_replaced_at_the_claim(api):
    run = accepted_run(api, make_pdf(1))
    assert execute_stage(str(run.id), "extract")["outcome"] == "succeeded"
    dropped = _backend_pid()
    # As a restarted server, or a proxy closing idle connections, would: the next job
    # skips the health check of a connection used a moment ago.
    with another_connection(autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [dropped])

    assert execute_stage(str(run.id), "embed")["outcome"] == "succeeded"
    assert _backend_pid() != dropped


def test_only_a_connection_idle_for_a_while_has_its_health_checked_before_a_job(api, monkeypatch):
    run = accepted_run(api, make_pdf(1))
    execute_stage(str(run.id), "extract")
    checks = []
    usable = connection.is_usable
    monkeypatch.setattr(connection, "is_usable", lambda: checks.append(1) or usable())

    engine._connection_for_job()  # the previous job has just ended
    _backend_pid()
    assert checks == []

    monkeypatch.setattr(engine, "_used", [time.monotonic() - engine.FRESH_CONNECTION_SECONDS])
    engine._connection_for_job()
    _backend_pid()
    assert checks == [1]
