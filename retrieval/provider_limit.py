"""The HTTP embedding provider's limits, shared by every worker on every host: the one
rate limiter (core/rate_limit.py) with the provider's rules.

Before each request a worker takes a permit: one request and its estimated tokens in the
last minute (PAPERLANE_EMBED_REQUESTS_PER_MINUTE, PAPERLANE_EMBED_TOKENS_PER_MINUTE) and,
with PAPERLANE_EMBED_CONCURRENCY, a slot among the requests in flight, all at once or
none. A slot is given back when the request ends, and expires after the request's timeout
so that a worker killed mid-request frees it. A 429's Retry-After holds every worker
until it has passed (`provider_hold`).
"""

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings

from core.rate_limit import RateLimitUnavailable, Rule, rate_hold, rate_release, rate_take

REQUESTS = "paperlane:embed:requests"
TOKENS = "paperlane:embed:tokens"
IN_FLIGHT = "paperlane:embed:in-flight"
HOLD = "paperlane:embed:hold"

# Providers state their limits per minute; tests shorten it.
WINDOW_SECONDS = 60.0
# A worker waiting for a permit asks again at least this often.
LONGEST_SLEEP = 1.0
# A slot in flight may be given back at any moment: a worker waiting for one asks this often.
SLOT_POLL = 0.05


class LimitReached(ConnectionError):
    """No permit before the caller's deadline (a person is waiting): the provider is busy."""


def estimate_tokens(text: str) -> int:
    """Tokens a text will cost, estimated before sending: about four characters each."""
    return len(text) // 4 + 1


def _wait(refused: dict[str, float]) -> float:
    # A full window's wait is known; a slot's only bounds when one is given back.
    known = [seconds for key, seconds in refused.items() if key != IN_FLIGHT]
    return max(known, default=SLOT_POLL)


@contextmanager
def provider_permit(*, tokens: int, deadline: float | None = None) -> Iterator[float]:
    """Wait for a permit to send one request of `tokens`; yields the seconds waited and
    gives the request's slot back when the block ends. With `deadline` (time.monotonic()),
    raises LimitReached rather than wait past it. A Redis that does not answer raises
    RateLimitUnavailable, a transient error of the attempt."""
    slot = Rule(
        key=IN_FLIGHT,
        limit=settings.PAPERLANE_EMBED_CONCURRENCY,
        window_seconds=settings.PAPERLANE_EMBED_TIMEOUT_SECONDS + 5,
    )
    rules = [
        Rule(
            key=REQUESTS,
            limit=settings.PAPERLANE_EMBED_REQUESTS_PER_MINUTE,
            window_seconds=WINDOW_SECONDS,
        ),
        Rule(
            key=TOKENS,
            limit=settings.PAPERLANE_EMBED_TOKENS_PER_MINUTE,
            window_seconds=WINDOW_SECONDS,
            cost=tokens,
        ),
        slot,
    ]
    entry = uuid.uuid4().hex
    waited = 0.0
    while refused := rate_take(rules=rules, hold_key=HOLD, entry=entry):
        wait = _wait(refused)
        if deadline is not None and time.monotonic() + wait > deadline:
            raise LimitReached(
                f"the embedding provider's shared limits allow no request for {wait:.1f} s"
            )
        time.sleep(min(wait, LONGEST_SLEEP))
        waited += min(wait, LONGEST_SLEEP)
    try:
        yield waited
    finally:
        rate_release(rules=[slot], entry=entry)


def provider_hold(*, seconds: float) -> bool:
    """Send no request from any worker for `seconds` (a provider's Retry-After). False
    when Redis could not be told: the caller waits it out itself."""
    try:
        rate_hold(key=HOLD, seconds=seconds)
    except RateLimitUnavailable:
        return False
    return True
