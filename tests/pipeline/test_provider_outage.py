"""Outages park, they do not kill: a try of embed that fails while the embedding
provider's breaker is open (core/provider_breaker.py) is recorded but counts neither
against the run's tries nor its retry window, so runs wait out an outage of any length
and finish by themselves when the provider answers again; a failure while the breaker is
closed (others' calls go through) still counts, so a poison input ends in the dead letter.

The slow tests run real `run_workers` processes against a local OpenAI-compatible server
(tests/support/embedding_server.py) with a retry budget far shorter than the outage.
"""

import re
import time
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from core.provider_breaker import breaker
from core.redis import redis_connection
from documents.models import Organisation, UsageEntry
from operations.stats.provider import provider_stats
from pipeline.engine import execute_stage
from pipeline.errors import PROVIDER_OUTAGE
from pipeline.models import TERMINAL_STATUSES, ImportRun, StageAttempt
from retrieval.embedding import PROVIDER
from tests.support.embedding_server import EmbeddingServer, failing, slow
from tests.support.files import make_pdf
from tests.support.pipeline import running_workers, wait_for, wait_terminal
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)

DIMENSIONS = 32
MODEL = "test-embed"
# Far longer than the retry budget the workers get (two tries, a one-second window).
OUTAGE_SECONDS = 45
BUDGET = {"PAPERLANE_RETRY_MAX_ATTEMPTS": "2", "PAPERLANE_RETRY_MIN_WINDOW_SECONDS": "1"}


def breaker_open(seconds: float) -> None:
    """The provider's breaker as it is after it opened, paused for `seconds`."""
    redis_connection().hset(
        breaker(PROVIDER).key, mapping={"until": time.time() + seconds, "opens": 1, "failures": 0}
    )


def breaker_closed() -> None:
    redis_connection().delete(breaker(PROVIDER).key)


def embed_now(run_id) -> str:
    """Embed the run at once, as if its retry's time (and any pause) had passed."""
    ImportRun.objects.filter(id=run_id).update(due_at=timezone.now())
    return execute_stage(str(run_id), "embed")["outcome"]


@pytest.fixture
def at_embed(api, settings):
    """A run at embed whose provider fails every call (a budget of one try, no window)."""
    settings.PAPERLANE_EMBEDDER = "tests.support.embedders.AlwaysBusyEmbedder"
    settings.PAPERLANE_RETRY_MAX_ATTEMPTS = 1
    settings.PAPERLANE_RETRY_MIN_WINDOW_SECONDS = 0
    run = accepted_run(api, make_pdf(1))
    assert execute_stage(str(run.id), "extract")["outcome"] == "succeeded"
    return run


def test_a_try_failed_while_the_provider_is_out_is_recorded_and_not_counted(at_embed):
    breaker_open(3)

    outcomes = [embed_now(at_embed.id) for _ in range(3)]

    run = ImportRun.objects.get(id=at_embed.id)
    assert outcomes == ["transient_error"] * 3
    # Three tries on a budget of one, and the run still waits: for the pause, then up to
    # as long again.
    assert (run.status, run.stage, run.error_code) == ("processing", "embed", PROVIDER_OUTAGE)
    assert (run.stage_attempts, run.provider_waits) == (3, 3)
    assert timedelta(seconds=1.5) < run.due_at - timezone.now() <= timedelta(seconds=6)
    assert "waits for the embedding provider" in run.error_message
    attempts = StageAttempt.objects.filter(run=run, stage="embed").order_by("number")
    assert [(a.number, a.outcome, a.error_code) for a in attempts] == [
        (n, "transient_error", PROVIDER_OUTAGE) for n in (1, 2, 3)
    ]
    assert all("this try is not counted" in a.error_message for a in attempts)
    assert all("503 Service Unavailable" in a.error_message for a in attempts)


def test_a_failure_once_the_provider_is_back_counts_and_ends_in_the_dead_letter(at_embed):
    breaker_open(3)
    assert embed_now(at_embed.id) == "transient_error"
    breaker_closed()  # others' calls went through: this input may be the problem

    assert embed_now(at_embed.id) == "transient_error"

    run = ImportRun.objects.get(id=at_embed.id)
    assert run.status == "dead_letter"
    assert run.error_message.startswith(
        "The embed step failed 1 times in a row (not counting 1 while its provider was down)"
    )
    # Every try kept a number, and so a job id, of its own.
    numbers = StageAttempt.objects.filter(run=run, stage="embed").values_list("number", flat=True)
    assert sorted(numbers) == [1, 2]


def test_the_retry_window_restarts_after_the_provider_is_back(at_embed, settings):
    settings.PAPERLANE_RETRY_MIN_WINDOW_SECONDS = 30
    breaker_open(3)
    assert embed_now(at_embed.id) == "transient_error"
    # The outage lasted a minute: longer than the window, which it does not use up.
    ImportRun.objects.filter(id=at_embed.id).update(
        stage_entered_at=timezone.now() - timedelta(seconds=60)
    )
    breaker_closed()

    assert embed_now(at_embed.id) == "transient_error"

    run = ImportRun.objects.get(id=at_embed.id)
    assert (run.status, run.error_code) == ("processing", "transient_error")
    assert (run.stage_attempts, run.provider_waits) == (2, 1)


# --- Real workers, a real provider over HTTP ------------------------------------------------


@pytest.fixture
def server():
    with EmbeddingServer(dimensions=DIMENSIONS) as running:
        yield running


def provider_env(server: EmbeddingServer) -> dict[str, str]:
    return {
        "PAPERLANE_EMBEDDER": "retrieval.http_embedder.HttpEmbedder",
        "PAPERLANE_EMBED_URL": server.url,
        "PAPERLANE_EMBED_MODEL": MODEL,
        "PAPERLANE_EMBEDDING_DIMENSIONS": str(DIMENSIONS),
        "PAPERLANE_EMBED_TIMEOUT_SECONDS": "1",
        "PAPERLANE_EMBED_BATCH_SIZE": "2",
        **BUDGET,
    }


def assert_charged_once(org: Organisation, runs: dict, pages: dict) -> None:
    for run in runs.values():
        charged = UsageEntry.objects.filter(document=run.document_id).values_list("pages")
        assert list(charged) == [(pages[run.id],)]
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (sum(pages.values()), 0)


OUTAGES = {"503": failing(503), "no answer within the timeout": slow(3)}


@pytest.mark.slow
@pytest.mark.parametrize("outage", OUTAGES.values(), ids=OUTAGES.keys())
def test_runs_wait_out_an_outage_far_past_their_retries_and_finish_when_it_ends(
    api, org, server, outage
):
    server.fail_until_told(outage)
    sizes = [1, 2, 3, 2]
    seen = Counter()
    with running_workers(concurrency="extract=1,ocr=1,embed=2", **provider_env(server)):
        runs = [
            accepted_run(api, make_pdf(n, words_per_page=250, label=f"Gale {i}"), name=f"g{i}.pdf")
            for i, n in enumerate(sizes)
        ]
        ids = [run.id for run in runs]
        wait_for(lambda: server.requests, timeout=30, what="the first call to the provider")
        began = server.requests[0].at
        while time.monotonic() - began < OUTAGE_SECONDS:
            ended = ImportRun.objects.filter(id__in=ids, status__in=TERMINAL_STATUSES)
            assert not ended.exists(), list(ended.values_list("status", "error_message"))
            stats = provider_stats(now=timezone.now())
            seen[stats.state] += 1
            seen["most waiting"] = max(seen["most waiting"], stats.waiting)
            time.sleep(1)
        calls_in_outage = len(server.requests)
        recovered = timezone.now()
        server.recover()
        finished = wait_terminal(ids, timeout=40)

    assert Counter(run.status for run in finished.values()) == {"succeeded": len(sizes)}
    assert_charged_once(org, finished, dict(zip(ids, sizes, strict=True)))
    # The operators' view saw the outage and the runs waiting for it.
    assert seen["paused"] + seen["probing"] >= OUTAGE_SECONDS // 2, seen
    assert seen["most waiting"] >= 2, seen
    # The attempts show the tries that waited, many more than the budget of two a run.
    waited = StageAttempt.objects.filter(stage="embed", error_code=PROVIDER_OUTAGE)
    assert waited.count() >= 8 and set(waited.values_list("outcome", flat=True)) == {
        "transient_error"
    }
    per_run = Counter(waited.values_list("run_id", flat=True))
    assert max(per_run.values()) > 2, per_run
    assert calls_in_outage >= waited.count()
    # Once the provider answers, every run finishes within a pause or two.
    assert max(run.finished_at for run in finished.values()) - recovered < timedelta(seconds=25)
    assert not redis_connection().exists(breaker(PROVIDER).key)  # closed again


@pytest.mark.slow
def test_a_poison_input_still_ends_in_the_dead_letter_while_others_succeed(api, org, server):
    server.poison = {"Nightshade"}
    good: dict = {}
    with running_workers(concurrency="extract=1,ocr=1,embed=2", **provider_env(server)):
        poison = accepted_run(api, make_pdf(1, label="Nightshade"), name="poison.pdf")

        def poison_ended() -> bool:
            # Others keep arriving and succeeding while the poison is tried.
            if len(good) < 40:
                run = accepted_run(api, make_pdf(1, label=f"Fern {len(good)}"), name="fern.pdf")
                good[run.id] = 1
            return ImportRun.objects.filter(id=poison.id, status__in=TERMINAL_STATUSES).exists()

        wait_for(poison_ended, timeout=60, interval=0.5, what="the poison run to end")
        finished = wait_terminal(good, timeout=40)

    poison.refresh_from_db()
    assert poison.status == "dead_letter", (poison.status, poison.error_message)
    assert re.match(r"The embed step failed [23] times in a row", poison.error_message)
    counted = StageAttempt.objects.filter(run=poison, stage="embed").exclude(
        error_code=PROVIDER_OUTAGE
    )
    assert counted.count() >= 2
    assert Counter(run.status for run in finished.values()) == {"succeeded": len(good)}
    assert_charged_once(org, finished, good)
