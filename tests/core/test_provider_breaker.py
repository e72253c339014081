"""The provider breaker (core/provider_breaker.py) with real Redis, and lane workers that leave a
paused stage's jobs queued: the embed stage's provider keeps failing, so its jobs wait
while the worker takes its other stages' jobs, and are taken once the pause ends."""

import time
import uuid

import pytest

from core.provider_breaker import KEY, breaker
from core.redis import redis_connection
from pipeline.broker import get_queue
from pipeline.models import RunPriority
from pipeline.queues import priority_queue_names
from pipeline.rq_workers import LaneWorker
from retrieval.embedding import PROVIDER
from tests.pipeline.test_lanes import enqueue_pick
from tests.support.lanes import picks

pytestmark = pytest.mark.django_db

INTERACTIVE = RunPriority.INTERACTIVE


@pytest.fixture
def provider(redis_conn, monkeypatch):
    monkeypatch.setattr("core.provider_breaker.PAUSE_AFTER_FAILURES", 3)
    monkeypatch.setattr("core.provider_breaker.PAUSE_SECONDS", 1.0)
    monkeypatch.setattr("core.provider_breaker.PAUSE_MAX_SECONDS", 3.0)
    named = breaker(PROVIDER)
    named._failing = False  # this process's handle outlives the test's Redis database
    return named


def test_it_opens_after_failures_in_a_row_and_a_success_closes_it(provider):
    assert provider.paused_for() == 0

    assert [provider.failed(), provider.failed()] == [0, 0]
    assert provider.paused_for() == 0
    assert provider.failed() == 1.0
    assert 0.8 < provider.paused_for() <= 1.0

    provider.succeeded()
    assert provider.paused_for() == 0
    assert not redis_connection().exists(KEY.format(name=PROVIDER))
    # Closed again: it takes three failures in a row to open once more.
    assert [provider.failed(), provider.failed()] == [0, 0]


def _pause_over(provider) -> None:
    redis_connection().hset(provider.key, "until", time.time() - 0.001)


def test_a_failure_after_a_pause_opens_it_again_at_once_for_longer_up_to_the_cap(provider):
    pauses = [provider.failed() for _ in range(3)]
    for _ in range(3):  # each a failed probe once the pause is over
        _pause_over(provider)
        pauses.append(provider.failed())

    assert pauses == [0, 0, 1.0, 2.0, 3.0, 3.0]


def test_a_failure_while_it_is_open_neither_extends_nor_doubles_the_pause(provider):
    for _ in range(3):
        provider.failed()
    until = float(redis_connection().hget(provider.key, "until"))

    # Calls that began before it opened, failing now.
    assert [provider.failed(), provider.failed()] == [0, 0]
    assert float(redis_connection().hget(provider.key, "until")) == until
    _pause_over(provider)
    assert provider.failed() == 2.0  # the probe: the second opening, not the fourth


def test_failures_from_every_worker_count_together(provider):
    other_process = type(provider)(PROVIDER)  # another worker's handle on the same breaker
    provider.failed()
    other_process.failed()

    assert provider.failed() == 1.0
    assert other_process.paused_for() > 0


def test_a_success_while_closed_sends_nothing(provider):
    provider.succeeded()
    sent_before = redis_connection().info("stats")["total_commands_processed"]
    provider.succeeded()
    provider.succeeded()
    sent = redis_connection().info("stats")["total_commands_processed"] - sent_before

    assert sent == 1  # the INFO itself


def _worker(*stages: str) -> LaneWorker:
    queues = [
        get_queue(name) for stage in stages for name in priority_queue_names(stage, INTERACTIVE)
    ]
    return LaneWorker(queues, connection=redis_connection(), prefers=INTERACTIVE)


def test_a_paused_stages_jobs_wait_while_the_worker_takes_its_other_stages_jobs(provider):
    org = str(uuid.uuid4())
    enqueue_pick("embed", INTERACTIVE, org, "embed-0")
    enqueue_pick("extract", INTERACTIVE, org, "extract-0")
    for _ in range(3):
        provider.failed()  # paused for 1 s
    opened = time.monotonic()

    _worker("embed", "extract").work(burst=True)

    assert picks() == ["extract-0", "embed-0"]
    assert time.monotonic() - opened >= 0.9  # embed's job waited for the pause to end


def test_a_worker_whose_only_stage_is_paused_waits_then_takes_the_job(provider):
    org = str(uuid.uuid4())
    enqueue_pick("embed", INTERACTIVE, org, "embed-0")
    for _ in range(3):
        provider.failed()
    opened = time.monotonic()

    _worker("embed").work(burst=True)

    assert picks() == ["embed-0"]
    assert time.monotonic() - opened >= 0.9
