"""The HTTP embedding provider's limits, shared by every worker on every host through Redis.

Before each request a worker takes a permit: one request and its estimated tokens from a
sliding window (PAPERLANE_EMBED_REQUESTS_PER_MINUTE, PAPERLANE_EMBED_TOKENS_PER_MINUTE
over PAPERLANE_EMBED_RATE_WINDOW_SECONDS) and, with PAPERLANE_EMBED_CONCURRENCY, a slot
among the requests in flight. A sliding window rather than a bucket: no window of that
length ever holds more requests or tokens than the limit, which is how providers count.
A 429's Retry-After holds every worker until it has passed (`provider_hold`).

Times are Redis's own (TIME), so hosts whose clocks differ share one window. A slot
expires after the request's timeout, so a worker killed mid-request frees it.
"""

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from redis.exceptions import RedisError

from core.redis import redis_connection

CALLS = "paperlane:embed:calls"  # sorted set: "<id>:<tokens>" scored by the time sent
SLOTS = "paperlane:embed:slots"  # sorted set: request id scored by when its slot expires
HOLD = "paperlane:embed:hold"  # the time before which no request is sent (a 429)

# KEYS: calls, slots, hold. ARGV: window, max requests, max tokens, tokens, max slots,
# slot lifetime, id. Returns the seconds to wait before asking again, or 0 with the
# permit taken (the request counted, its slot held).
_TAKE = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local hold = tonumber(redis.call('GET', KEYS[3]) or '0')
if hold > now then return tostring(hold - now) end
local window = tonumber(ARGV[1])
local max_requests = tonumber(ARGV[2])
local max_tokens = tonumber(ARGV[3])
local tokens = tonumber(ARGV[4])
local max_slots = tonumber(ARGV[5])
if max_tokens > 0 and tokens > max_tokens then tokens = max_tokens end
if max_slots > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
    if redis.call('ZCARD', KEYS[2]) >= max_slots then return '0.05' end
end
local wait = 0
if max_requests > 0 or max_tokens > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
    local calls = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
    local count = #calls / 2
    if max_requests > 0 and count >= max_requests then
        -- the oldest calls must leave the window until one more fits
        wait = tonumber(calls[(count - max_requests) * 2 + 2]) + window - now
    end
    if max_tokens > 0 then
        local used = 0
        for i = 1, #calls, 2 do
            used = used + tonumber(string.match(calls[i], ':(%d+)$'))
        end
        for i = 1, #calls, 2 do
            if used + tokens <= max_tokens then break end
            used = used - tonumber(string.match(calls[i], ':(%d+)$'))
            wait = math.max(wait, tonumber(calls[i + 1]) + window - now)
        end
    end
end
if wait > 0 then return tostring(wait) end
if max_requests > 0 or max_tokens > 0 then
    redis.call('ZADD', KEYS[1], now, ARGV[7] .. ':' .. tokens)
    redis.call('PEXPIRE', KEYS[1], math.ceil(window * 1000) + 1000)
end
if max_slots > 0 then
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[6]), ARGV[7])
    redis.call('PEXPIRE', KEYS[2], math.ceil(tonumber(ARGV[6]) * 1000) + 1000)
end
return '0'
"""

# KEYS: hold. ARGV: seconds. Holds every worker that long from now, unless a longer hold stands.
_HOLD = """
local clock = redis.call('TIME')
local until_ = tonumber(clock[1]) + tonumber(clock[2]) / 1000000 + tonumber(ARGV[1])
if until_ > tonumber(redis.call('GET', KEYS[1]) or '0') then
    redis.call('SET', KEYS[1], tostring(until_), 'PX', math.ceil(tonumber(ARGV[1]) * 1000) + 1000)
end
return 1
"""

# A worker waiting for a permit asks again at least this often.
LONGEST_SLEEP = 1.0


class LimitUnavailable(ConnectionError):
    """Redis did not answer the permit: a transient failure of the attempt."""


def estimate_tokens(text: str) -> int:
    """Tokens a text will cost, estimated before sending: about four characters each."""
    return len(text) // 4 + 1


class LimitReached(ConnectionError):
    """No permit before the caller's deadline (a person is waiting): the provider is busy."""


@contextmanager
def provider_permit(*, tokens: int, deadline: float | None = None) -> Iterator[float]:
    """Wait for a permit to send one request of `tokens`; yields the seconds waited and
    frees the request's slot when the block ends. With `deadline` (time.monotonic()),
    raises LimitReached rather than wait past it."""
    ident = uuid.uuid4().hex
    slots = settings.PAPERLANE_EMBED_CONCURRENCY
    slot_lifetime = settings.PAPERLANE_EMBED_TIMEOUT_SECONDS + 5
    waited = 0.0
    try:
        while True:
            wait = float(
                redis_connection().eval(
                    _TAKE,
                    3,
                    CALLS,
                    SLOTS,
                    HOLD,
                    settings.PAPERLANE_EMBED_RATE_WINDOW_SECONDS,
                    settings.PAPERLANE_EMBED_REQUESTS_PER_MINUTE,
                    settings.PAPERLANE_EMBED_TOKENS_PER_MINUTE,
                    tokens,
                    slots,
                    slot_lifetime,
                    ident,
                )
            )
            if wait <= 0:
                break
            if deadline is not None and time.monotonic() + wait > deadline:
                raise LimitReached(
                    f"the embedding provider's shared limits allow no request for {wait:.1f} s"
                )
            time.sleep(min(wait, LONGEST_SLEEP))
            waited += min(wait, LONGEST_SLEEP)
    except RedisError as exc:
        raise LimitUnavailable(f"could not take an embedding permit from Redis: {exc}") from exc
    try:
        yield waited
    finally:
        if slots > 0:
            try:
                redis_connection().zrem(SLOTS, ident)
            except RedisError:
                pass  # the slot expires with the request's timeout


def provider_hold(*, seconds: float) -> None:
    """Send no request from any worker for `seconds` (a provider's Retry-After)."""
    try:
        redis_connection().eval(_HOLD, 1, HOLD, seconds)
    except RedisError:
        pass  # this worker still waits itself before it sends again
