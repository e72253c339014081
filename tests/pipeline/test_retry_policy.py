import random

import pytest

from pipeline.models import RunSource
from pipeline.retry import backoff_seconds, retries_left
from pipeline.services.workers import Failure, run_claim, run_record_failure
from pipeline.stage_list import first_stage
from tests.support.files import make_pdf
from tests.support.uploads import accepted_run


def test_backoff_bounds_grow_exponentially_up_to_the_cap(settings):
    settings.PAPERLANE_RETRY_BASE_SECONDS = 2
    settings.PAPERLANE_RETRY_CAP_SECONDS = 30
    rng = random.Random(7)

    for attempt, bound in [(1, 2), (2, 4), (3, 8), (4, 16), (5, 30), (9, 30)]:
        delays = [backoff_seconds(attempt=attempt, rng=rng) for _ in range(500)]
        assert 0 <= min(delays) and max(delays) <= bound
        # Full jitter: spread over the whole range, not bunched at the bound.
        assert min(delays) < bound * 0.1 and max(delays) > bound * 0.9


def test_two_runs_failing_together_do_not_retry_together(settings):
    settings.PAPERLANE_RETRY_BASE_SECONDS = 10
    delays = {round(backoff_seconds(attempt=3), 3) for _ in range(50)}

    assert len(delays) > 45


def test_retries_stop_at_the_configured_bound(settings):
    settings.PAPERLANE_RETRY_MAX_ATTEMPTS = 3
    settings.PAPERLANE_RETRY_MIN_WINDOW_SECONDS = 60

    after = 61
    assert [retries_left(attempt=n, in_stage_seconds=after) for n in (1, 2, 3, 4)] == [
        True,
        True,
        False,
        False,
    ]


def test_quick_failures_are_retried_until_the_stage_has_failed_for_the_window(settings):
    settings.PAPERLANE_RETRY_MAX_ATTEMPTS = 3
    settings.PAPERLANE_RETRY_MIN_WINDOW_SECONDS = 60

    # Five quick tries inside a ten-second outage: not given up on.
    assert retries_left(attempt=5, in_stage_seconds=10)
    assert not retries_left(attempt=5, in_stage_seconds=60)


@pytest.mark.parametrize(("window", "status"), [(60, "processing"), (0, "dead_letter")])
def test_a_stage_past_its_tries_but_inside_the_window_is_tried_again(api, settings, window, status):
    settings.PAPERLANE_RETRY_MAX_ATTEMPTS = 1
    settings.PAPERLANE_RETRY_MIN_WINDOW_SECONDS = window
    run = accepted_run(api, make_pdf(1))
    stage = first_stage(RunSource.API)
    claim = run_claim(run_id=run.id, stage=stage, job_id="job-1", worker=f"host.1.{stage}")

    after = run_record_failure(
        claim=claim,
        outcome="transient_error",
        code="transient_error",
        message="A temporary problem.",
        failure=Failure(detail="provider answered 503"),
        permanent=False,
    )

    assert after.status == status
    assert (after.due_at is not None) == (status == "processing")
