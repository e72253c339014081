"""Backoff for transient errors: exponential, capped, with full jitter."""

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
    provider that is down for only a short while."""
    return (
        attempt < settings.PAPERLANE_RETRY_MAX_ATTEMPTS
        or in_stage_seconds < settings.PAPERLANE_RETRY_MIN_WINDOW_SECONDS
    )
