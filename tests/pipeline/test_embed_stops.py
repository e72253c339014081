"""A run stopped in the middle of embed, with real worker processes: nothing it wrote is
found and nothing is charged, its worker calls the provider no more once the run is not
its own, and the attempt says what happened.

To stop the worker at a moment the test chooses, the test has the recording embedder
hold its answer: the worker is then provably inside one provider call, with every batch
before it saved and this one not, for as long as the test keeps it paused.
"""

import os
import signal
import time

import pytest

from core.redis import redis_connection
from documents.models import Chunk, Document, QuotaReservation, UsageEntry
from pipeline.models import ImportRun, StageAttempt
from tests.support.embedders import PAUSED, holding_jobs, provider_calls
from tests.support.files import make_pdf
from tests.support.pipeline import running_workers, wait_for, wait_terminal
from tests.support.uploads import accepted_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

RECORDING = {
    "PAPERLANE_EMBEDDER": "tests.support.embedders.RecordingEmbedder",
    "PAPERLANE_EMBED_BATCH_SIZE": "1",
    "EMBED_DELAY": "0.2",
}


def calls_of(run: ImportRun) -> list[dict]:
    return [call for call in provider_calls() if str(run.id) in call["job"]]


def found(api, words: str) -> list[str]:
    return [hit["document_id"] for hit in api.get("/api/v1/search", {"q": words}).json()["results"]]


def hold_in_a_call(run: ImportRun, *, batches: int) -> ImportRun:
    """Once the run's embed has made `batches` calls, pause the provider's answers and
    wait until the worker has saved every batch but the one it is waiting on: it is then
    inside a call, before the batch is saved. Returns the run as it is then."""
    wait_for(lambda: len(calls_of(run)) >= batches, timeout=60, what=f"{batches} batches")
    redis_connection().set(PAUSED, 1)

    def held() -> ImportRun | None:
        if not any(str(run.id) in job for job in holding_jobs()):
            return None
        now = ImportRun.objects.get(id=run.id)
        return now if now.progress_done == len(calls_of(run)) - 1 else None

    return wait_for(held, timeout=30, what="the worker to wait for an answer")


def release_the_answers() -> None:
    redis_connection().delete(PAUSED)


def assert_nothing_found_or_charged(api, org, run: ImportRun, words: str) -> None:
    assert not Chunk.objects.filter(document=run.document_id).exists()
    document = Document.objects.get(id=run.document_id)
    assert (document.searchable_version, document.chunk_count) == (None, 0)
    assert found(api, words) == []
    assert not UsageEntry.objects.filter(document=run.document_id).exists()
    assert QuotaReservation.objects.get(id=run.reservation_id).status == "released"
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (0, 0)


def test_a_run_cancelled_mid_embed_costs_no_further_call_and_leaves_nothing(api, org):
    # A lease far longer than the test: the worker's keeper, renewing it every third,
    # does not notice the cancel before the worker's own check does.
    with running_workers(**RECORDING, PAPERLANE_LEASE_SECONDS="60"):
        run = accepted_run(api, make_pdf(6, words_per_page=300, label="Lighthouse keeper"))
        held = hold_in_a_call(run, batches=2)
        # Embedded and saved so far, and not searchable: it has not settled.
        assert Chunk.objects.filter(document=run.document_id).count() == held.progress_done
        assert found(api, "lighthouse keeper") == []

        assert api.post(f"/api/v1/runs/{run.id}/cancel").status_code == 200
        cancelled_at, calls = time.time(), len(calls_of(run))
        release_the_answers()

        attempt = wait_for(
            lambda: (
                StageAttempt.objects.filter(run=run, stage="embed")
                .exclude(outcome="running")
                .first()
            ),
            timeout=30,
            what="the worker to stop",
        )

    assert len(calls_of(run)) == calls  # no call after the cancel
    assert all(call["at"] < cancelled_at for call in calls_of(run))
    assert attempt.outcome == "stopped", attempt.error_message
    assert "cancelled by api-token:" in attempt.error_message
    assert attempt.finished_at.timestamp() > cancelled_at  # when the worker really stopped
    assert ImportRun.objects.get(id=run.id).status == "cancelled"
    assert_nothing_found_or_charged(api, org, run, "lighthouse keeper")


def test_a_run_dead_lettered_during_embed_leaves_nothing_found_or_charged(api, org):
    env = {
        "PAPERLANE_EMBEDDER": "tests.support.embedders.FailsAfterEmbedder",
        "EMBED_SUCCESSES": "2",
        "PAPERLANE_EMBED_BATCH_SIZE": "1",
        "PAPERLANE_RETRY_MAX_ATTEMPTS": "2",
    }
    with running_workers(**env):
        run = accepted_run(api, make_pdf(6, words_per_page=300, label="Harbour dues"))
        finished = wait_terminal([run.id], timeout=60)[run.id]

    assert finished.status == "dead_letter", finished.error_message
    # Two batches were embedded and saved before the provider went down.
    assert finished.progress_done == 2
    embed = StageAttempt.objects.filter(run=run, stage="embed").order_by("number")
    assert list(embed.values_list("outcome", flat=True)) == ["transient_error"] * 2
    assert_nothing_found_or_charged(api, org, run, "harbour dues")


def test_a_worker_paused_past_its_lease_calls_the_provider_no_more_and_says_so(api, org):
    with running_workers(**RECORDING, PAPERLANE_LEASE_SECONDS="4"):
        run = accepted_run(api, make_pdf(6, words_per_page=300, label="Tide table"))
        held = hold_in_a_call(run, batches=2)
        job, _, worker = held.lease_owner.partition("@")
        pid = int(worker.split(".")[-2])

        os.kill(pid, signal.SIGSTOP)
        try:
            # Its lease expires; the sweeper takes the stage back and delivers it again.
            taken_back = wait_for(
                lambda: StageAttempt.objects.filter(
                    run=run, stage="embed", job_id=job, outcome="abandoned"
                ).first(),
                timeout=30,
                what="the stage to be taken back",
            )
        finally:
            os.kill(pid, signal.SIGCONT)
        calls = len([call for call in calls_of(run) if call["job"] == job])
        release_the_answers()

        finished = wait_terminal([run.id], timeout=60)[run.id]

    assert finished.status == "succeeded", finished.error_message
    # The paused worker came back and stopped before its next call; the stage was
    # done again by the delivery that took it back.
    assert len([call for call in calls_of(run) if call["job"] == job]) == calls
    first = StageAttempt.objects.get(id=taken_back.id)
    assert first.outcome == "lease_lost", first.error_message
    assert first.finished_at > taken_back.finished_at
    assert [e.pages for e in UsageEntry.objects.filter(document=run.document_id)] == [6]
    document = Document.objects.get(id=run.document_id)
    assert document.chunk_count == Chunk.objects.filter(document=document).count() > 0
    assert found(api, "tide table") == [str(document.id)]
