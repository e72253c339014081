"""Requests counted in Redis over a sliding window: at most `limit` in any `window` seconds.

A request waits on this, so it uses the request client (a short timeout, no retries) and
its breaker: when Redis is down or silent the limiter lets requests through (fails open)
rather than taking the API down with it, and after a failure leaves Redis alone for the
breaker's pause. Times are Redis's own clock, the same for every web host.
"""

import os
from functools import cache

from redis import Redis
from redis.commands.core import Script

from core.redis import request_breaker, request_connection

# One sorted set per key: a member per admitted request, scored by its time in
# microseconds. Refused requests are not recorded, so hammering does not extend the wait.
# Returns -1 when admitted, else the microseconds until the oldest request leaves the window.
_TAKE = """
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], math.ceil(window / 1000))
  return -1
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return math.max(1, tonumber(oldest[2]) + window - now)
"""


@cache
def _take_script(connection: Redis) -> Script:
    return connection.register_script(_TAKE)


def window_take(*, key: str, limit: int, window_seconds: float) -> float | None:
    """Count one request under `key`. None when it is admitted (also when Redis could not
    be asked); else the seconds until one more would be."""
    breaker = request_breaker()
    if breaker.open:
        return None
    window = int(window_seconds * 1_000_000)
    try:
        script = _take_script(request_connection())
        wait = script(keys=[key], args=[limit, window, os.urandom(8).hex()])
    except Exception:  # a limiter that cannot count must not refuse, nor fail the request
        breaker.trip("counting API requests")
        return None
    wait = int(wait)
    return None if wait < 0 else wait / 1_000_000
