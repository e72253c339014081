"""Redis connections per process, and the RQ queues built on them.

Two pooled clients: the workers' and the sweeper's, with room to wait; and
the one used where a person or an integration waits for the answer (enqueue
after accept, upload counters), with a short timeout, no retries, and a
breaker: after it failed it is not asked again for a while, so a Redis that
is down or silent costs a request one short timeout at most, and the
sweeper delivers what was not enqueued. Creating a client per call would
open a TCP connection on every request; the pools keep the accept path cheap.
"""

import logging
import threading
import time
from functools import cache

from django.conf import settings
from redis import Redis
from redis.backoff import NoBackoff
from redis.retry import Retry

logger = logging.getLogger(__name__)

# Where a person waits (enqueue after accept, upload counters), Redis gets this long,
# and after a failure is not asked from requests for the pause (the sweeper delivers).
REQUEST_TIMEOUT_SECONDS = 0.25
REQUEST_PAUSE_SECONDS = 15


@cache
def _connection(url: str) -> Redis:
    return Redis.from_url(
        url, socket_connect_timeout=2, socket_timeout=10, health_check_interval=30
    )


def redis_connection() -> Redis:
    return _connection(settings.REDIS_URL)


@cache
def _stats_connection(url: str) -> Redis:
    # Shorter waits than the workers' client: a page must not hang on a silent Redis.
    return Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)


def stats_connection() -> Redis:
    """A pooled client for the operators' reads and the samples they chart."""
    return _stats_connection(settings.REDIS_URL)


@cache
def _request_connection(url: str, timeout: float) -> Redis:
    return Redis.from_url(
        url,
        socket_connect_timeout=timeout,
        socket_timeout=timeout,
        health_check_interval=30,
        retry=Retry(NoBackoff(), 0),
    )


def request_connection() -> Redis:
    """The client for calls a person waits on: REQUEST_TIMEOUT_SECONDS."""
    return _request_connection(settings.REDIS_URL, REQUEST_TIMEOUT_SECONDS)


class RequestBreaker:
    """Open for REQUEST_PAUSE_SECONDS after a failure: callers skip Redis."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._until = 0.0

    @property
    def open(self) -> bool:
        return time.monotonic() < self._until

    def trip(self, what: str) -> None:
        pause = REQUEST_PAUSE_SECONDS
        with self._lock:
            self._until = time.monotonic() + pause
        logger.warning("Redis did not answer %s; not asking it from requests for %ss", what, pause)


@cache
def _breaker(url: str) -> RequestBreaker:
    return RequestBreaker()


def request_breaker() -> RequestBreaker:
    return _breaker(settings.REDIS_URL)


def caller_connection(*, in_request: bool) -> tuple[Redis | None, RequestBreaker | None]:
    """The client for a call (an enqueue, a breaker's count, a kept query vector), and the
    breaker to trip if it fails. `in_request`: someone waits for the answer, so the
    request client (short timeouts) and its breaker, and no client (None) while the
    breaker is open; otherwise the workers' client, no breaker."""
    if not in_request:
        return redis_connection(), None
    breaker = request_breaker()
    return (None if breaker.open else request_connection()), breaker
