"""Uploads accepted and refused, at the API and the upload page: counters in Redis.

Counting is on the accept path, so it must never fail or slow a request: it
uses the request client (a short timeout) and its breaker (after a failure
requests leave Redis alone for a while). A count lost while Redis is away is
acceptable.
"""

from redis import Redis

from core.redis import request_breaker, request_connection

UPLOADS_KEY = "paperlane:stats:uploads"

ACCEPTED, REPLAYED, DUPLICATE, REFUSED = "accepted", "replayed", "duplicate", "refused"


def upload_count(*, channel: str, result: str, code: str = "") -> None:
    """Count one answer to an upload: `channel` "api" or "web", `result` accepted,
    replayed (an Idempotency-Key seen before), duplicate (bytes of a live document,
    answered with it) or refused with the error `code`."""
    breaker = request_breaker()
    if breaker.open:
        return
    try:
        request_connection().hincrby(UPLOADS_KEY, f"{channel}|{result}|{code}", 1)
    except Exception:  # never let counting break or hold up an upload
        breaker.trip("counting an upload")


def upload_counts(*, connection: Redis) -> dict[tuple[str, str, str], int]:
    """(channel, result, code) -> uploads answered so; raises RedisError if Redis is away."""
    counts = {}
    for field_name, value in connection.hgetall(UPLOADS_KEY).items():
        channel, result, code = field_name.decode().split("|", 2)
        counts[(channel, result, code)] = int(value)
    return counts
