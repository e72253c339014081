"""Backoff for transient errors: exponential, capped, with full jitter; and the wait of a
run whose provider is in an outage."""

import random

from django.conf import settings


def backoff_seconds(*, attempt: int, rng: random.Random | None = None) -> float:
    """Delay before try `attempt + 1`, after `attempt` tries have failed.

    Full jitter (a uniform draw between 0 and the exponential bound) spreads
    retries of runs that failed together, so they do not return together.
    """
    bound = min(
        settings.PAPERLANE_RETRY_CAP_SECONDS,
        settings.PAPERLANE_RETRY_BASE_SECONDS * (2 ** max(attempt - 1, 0)),
    )
    return (rng or random).uniform(0, bound)


def retries_left(*, attempt: int, in_stage_seconds: float = 0.0) -> bool:
    """Whether a stage that failed its `attempt`-th try, `in_stage_seconds` after it
    started, is tried again. Both bounds must be reached before it is dead-lettered:
    a few quick tries (full jitter can make them very quick) must not give up on a
    provider that is down for only a short while. A try made while the provider was in
    an outage counts in neither: services/workers.py passes the tries and the time that
    count."""
    return (
        attempt < settings.PAPERLANE_RETRY_MAX_ATTEMPTS
        or in_stage_seconds < settings.PAPERLANE_RETRY_MIN_WINDOW_SECONDS
    )


def provider_wait_seconds(*, pause: float, rng: random.Random | None = None) -> float:
    """Delay before the next try of a stage whose provider is in an outage, its breaker
    paused for `pause` seconds: when the pause ends, plus up to as long again (full
    jitter), so the runs waiting for it do not all come back at once."""
    return pause + (rng or random).uniform(0, pause)
