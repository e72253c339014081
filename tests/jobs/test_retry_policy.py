import random

from jobs.retry import backoff_seconds, retries_left


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

    assert [retries_left(attempt=n) for n in (1, 2, 3, 4)] == [True, True, False, False]
