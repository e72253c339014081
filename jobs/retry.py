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


def retries_left(*, attempt: int) -> bool:
    return attempt < settings.PAPERLANE_RETRY_MAX_ATTEMPTS
