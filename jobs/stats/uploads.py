"""Uploads accepted and refused, at the API and the upload page: counters in Redis.

Counting is on the accept path, so it must never fail or slow a request: it
uses its own pooled client with a 100 ms timeout, and after a failure it stops
trying for a while. A count lost while Redis is away is acceptable.
"""

import logging
import threading
import time
from functools import cache

from django.conf import settings
from redis import Redis

logger = logging.getLogger(__name__)

UPLOADS_KEY = "paperlane:stats:uploads"
# After Redis failed to count, skip counting for this long (seconds).
PAUSE_AFTER_FAILURE = 30.0

ACCEPTED, REPLAYED, REFUSED = "accepted", "replayed", "refused"


@cache
def _client(url: str) -> Redis:
    return Redis.from_url(url, socket_connect_timeout=0.1, socket_timeout=0.1)


class _Pause:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._until = 0.0

    @property
    def active(self) -> bool:
        return time.monotonic() < self._until

    def start(self) -> None:
        with self._lock:
            self._until = time.monotonic() + PAUSE_AFTER_FAILURE


_pause = _Pause()


def upload_count(*, channel: str, result: str, code: str = "") -> None:
    """Count one answer to an upload: `channel` "api" or "web", `result` accepted,
    replayed (an Idempotency-Key seen before) or refused with the error `code`."""
    if _pause.active:
        return
    try:
        _client(settings.REDIS_URL).hincrby(UPLOADS_KEY, f"{channel}|{result}|{code}", 1)
    except Exception:  # never let counting break or hold up an upload
        _pause.start()
        logger.warning("could not count an upload; not counting for %ss", PAUSE_AFTER_FAILURE)


def upload_counts(*, connection: Redis) -> dict[tuple[str, str, str], int]:
    """(channel, result, code) -> uploads answered so; raises RedisError if Redis is away."""
    counts = {}
    for field_name, value in connection.hgetall(UPLOADS_KEY).items():
        channel, result, code = field_name.decode().split("|", 2)
        counts[(channel, result, code)] = int(value)
    return counts
