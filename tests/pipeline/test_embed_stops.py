"""A run stopped in the middle of embed, with real worker processes: nothing it wrote is
found and nothing is charged, its worker calls the provider no more once the run is not
its own, and the attempt says what happened.

To stop the worker between two batches at a moment the test chooses, the test empties
the shared rate limit's bucket in Redis: the worker then waits for a token, provably
between two provider calls, for as long as the test keeps the bucket empty.
"""

import os
import signal
import time

import pytest

from core.redis import redis_connection
from documents.models import Chunk, Document, QuotaReservation, UsageEntry
from pipeline.models import ImportRun, StageAttempt
from tests.support.embedders import provider_calls
from tests.support.files import make_pdf
from tests.support.pipeline import running_workers, wait_for, wait_terminal
from tests.support.uploads import accepted_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

BUCKET = "paperlane:ratelimit:embed"  # retrieval.embedding.rate_limit_wait's key
RECORDING = {
    "PAPERLANE_EMBEDDER": "tests.support.embedders.RecordingEmbedder",
    "PAPERLANE_EMBED_BATCH_SIZE": "1",
    "PAPERLANE_EMBED_RATE_PER_SECOND": "5",
}


def calls_of(run: ImportRun) -> list[dict]:
    return [call for call in provider_calls() if str(run.id) in call["job"]]


def found(api, words: str) -> list[str]:
    return [hit["document_id"] for hit in api.get("/api/v1/search", {"q": words}).json()["results"]]


def hold_between_batches(run: ImportRun, *, batches: int) -> ImportRun:
    """Once the run's embed has made `batches` calls, empty the rate limit's bucket and
    wait until the worker has saved every batch it embedded: it is then waiting for a
    token, before its next call. Returns the run as it is then."""
    wait_for(lambda: len(calls_of(run)) >= batches, timeout=60, what=f"{batches} batches")
    redis_connection().hset(BUCKET, mapping={"tokens": -100_000, "at": time.time()})

    def settled() -> ImportRun | None:
        before = len(calls_of(run))
        time.sleep(1)
        now = ImportRun.objects.get(id=run.id)
        calls = len(calls_of(run))
        return now if calls == before and now.progress_done == calls else None

    return wait_for(settled, timeout=30, what="the worker to wait for a token")


def release_the_bucket() -> None:
    redis_connection().delete(BUCKET)


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
        held = hold_between_batches(run, batches=2)
        # Embedded and saved so far, and not searchable: it has not settled.
        assert Chunk.objects.filter(document=run.document_id).count() == held.progress_done
        assert found(api, "lighthouse keeper") == []

        assert api.post(f"/api/v1/runs/{run.id}/cancel").status_code == 200
        cancelled_at, calls = time.time(), len(calls_of(run))
        release_the_bucket()

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
        held = hold_between_batches(run, batches=2)
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
        release_the_bucket()

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
