"""The one rate limiter: calls counted in Redis over sliding windows, on Redis's clock.

A call is counted under one or more rules at once, or under none (`rate_take`). A rule
(`Rule`) allows at most `limit` of cost under its key in any `window_seconds`, which
covers each use:
- requests in a window: cost 1 (an API token's requests, the embedding provider's);
- a budget of tokens: the call's estimated tokens as its cost;
- a cap on calls in flight: the window is the longest a call may last, and the call's
  entry leaves when it ends (`rate_release`), or at the window's end if its caller died;
- a hold: nothing is counted under a hold's key before it has passed (`rate_hold`, a
  provider's Retry-After, or an organisation's failed work), checked in the same call.
A sliding log rather than a bucket: no window ever holds more than the limit, which is
how providers count. Times are Redis's own (TIME, key expiry), so hosts whose clocks
differ share one window.

Not the `limits` library (5.8, read in its source): its exact window (the moving window,
RedisStorage.acquire_entry) stamps each entry with the calling host's time.time(); its
Redis-timed sliding-window counter estimates from the previous window's count, so a
window can hold more than the limit; a weighted hit pushes one list entry per unit of
cost (a million-token budget, a million entries); each hit takes one limit, so requests,
tokens and slots cannot be taken all or none; and it has no slot given back at the end
of a call, nor a hold.
"""

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from redis import Redis
from redis.commands.core import Script
from redis.exceptions import RedisError

from core.redis import redis_connection, request_breaker, request_connection

# KEYS: each rule's log and its total, then the hold's key if there is one. A log is a
# sorted set, a member "<entry>:<cost>" per call scored by Redis's TIME in microseconds;
# its total is the cost in it, so a call reads no more of the log than has expired.
# ARGV[1] says the step:
#   'take': per rule: limit, window (us), member. Returns {} with the member counted
#           under every rule, else {index, us} for the hold (index 0) or each rule that
#           refused: its wait until this call fits. A refusal writes nothing.
#   'release': per rule: member; it leaves the log before its time.
#   'hold': ARGV[2]: milliseconds from now before which nothing is taken (a longer
#           hold that stands is kept); with ARGV[3] 'add', added to what stands.
_STEP = """
local function cost(member)
    return tonumber(string.match(member, ':(%d+)$'))
end

-- The cost of a rule's calls still in the window, and how many older ones have left it.
local function count(log, total, window, now)
    if redis.call('EXISTS', log) == 0 then return 0, 0 end
    local expired = redis.call('ZRANGEBYSCORE', log, '-inf', now - window)
    local used = tonumber(redis.call('GET', total))
    if used == nil then  -- lost (a flush): counted again from the log
        used = 0
        for _, member in ipairs(redis.call('ZRANGE', log, 0, -1)) do
            used = used + cost(member)
        end
    end
    for _, member in ipairs(expired) do
        used = used - cost(member)
    end
    return used, #expired
end

-- The wait until the oldest calls in the window have left it and `need` more fits.
local function wait(log, used, need, limit, window, now, start)
    while true do
        local oldest = redis.call('ZRANGE', log, start, start + 31, 'WITHSCORES')
        if #oldest == 0 then return window end
        for i = 1, #oldest, 2 do
            used = used - cost(oldest[i])
            if used + need <= limit then
                return math.max(1, tonumber(oldest[i + 1]) + window - now)
            end
        end
        start = start + 32
    end
end

local step = ARGV[1]
if step == 'hold' then
    local ms, stands = tonumber(ARGV[2]), redis.call('PTTL', KEYS[1])
    if ARGV[3] == 'add' and stands > 0 then ms = ms + stands end
    if stands < ms then redis.call('SET', KEYS[1], 1, 'PX', ms) end
    return 1
end
if step == 'release' then
    for i = 2, #ARGV do
        local log, total = KEYS[2 * i - 3], KEYS[2 * i - 2]
        if redis.call('ZREM', log, ARGV[i]) == 1 and redis.call('EXISTS', total) == 1 then
            redis.call('DECRBY', total, cost(ARGV[i]))
        end
    end
    return 1
end
if #KEYS % 2 == 1 then  -- the last key is a hold's
    local held = redis.call('PTTL', KEYS[#KEYS])
    if held > 0 then return {0, held * 1000} end
end
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local rules = (#ARGV - 1) / 3
local used, gone, refused = {}, {}, {}
for r = 1, rules do
    local log, total = KEYS[2 * r - 1], KEYS[2 * r]
    local limit, window = tonumber(ARGV[3 * r - 1]), tonumber(ARGV[3 * r])
    local need = cost(ARGV[3 * r + 1])
    used[r], gone[r] = count(log, total, window, now)
    if used[r] + need > limit then
        table.insert(refused, r)
        table.insert(refused, wait(log, used[r], need, limit, window, now, gone[r]))
    end
end
if #refused > 0 then return refused end
for r = 1, rules do
    local log, total = KEYS[2 * r - 1], KEYS[2 * r]
    local window, member = tonumber(ARGV[3 * r]), ARGV[3 * r + 1]
    if gone[r] > 0 then redis.call('ZREMRANGEBYSCORE', log, '-inf', now - window) end
    redis.call('ZADD', log, now, member)
    redis.call('SET', total, used[r] + cost(member), 'PX', math.ceil(window / 1000))
    redis.call('PEXPIRE', log, math.ceil(window / 1000))
end
return {}
"""


@dataclass(frozen=True)
class Rule:
    """At most `limit` of cost under `key` in any `window_seconds` (0 or less: no limit);
    `cost` is what this call counts. A cost above the limit counts as the limit, so the
    call waits for an empty window rather than forever."""

    key: str
    limit: int
    window_seconds: float
    cost: int = 1


class RateLimitUnavailable(ConnectionError):
    """Redis did not answer the limiter: a transient failure of what waited on it."""


@cache
def _script(connection: Redis) -> Script:
    return connection.register_script(_STEP)


def _limiting(rules: Sequence[Rule]) -> list[Rule]:
    return [rule for rule in rules if rule.limit > 0]


def _keys(rules: Sequence[Rule]) -> list[str]:
    return [key for rule in rules for key in (rule.key, f"{rule.key}:total")]


def _member(rule: Rule, entry: str) -> str:
    return f"{entry}:{min(rule.cost, rule.limit)}"


def rate_take(
    *,
    rules: Sequence[Rule],
    hold_key: str | None = None,
    entry: str | None = None,
    fail_open: bool = False,
) -> dict[str, float]:
    """Count one call under every rule, or, if any refuses or a hold stands at `hold_key`,
    under none. Returns {} when counted; else, by key, the seconds the hold or each rule
    that refused needs before this call fits. `entry` names the call for `rate_release`.

    `fail_open`: a person waits (an API request): the request client (a short timeout)
    and its breaker, and a Redis that cannot answer admits the call rather than refuse
    it. Otherwise the workers' client, and a Redis failure is RateLimitUnavailable."""
    rules = _limiting(rules)
    if not rules and not hold_key:
        return {}
    entry = entry or uuid.uuid4().hex
    keys = _keys(rules) + ([hold_key] if hold_key else [])
    args: list[str | int] = ["take"]
    for rule in rules:
        args += [rule.limit, math.ceil(rule.window_seconds * 1_000_000), _member(rule, entry)]
    if fail_open:
        breaker = request_breaker()
        if breaker.open:
            return {}
        try:
            answer = _script(request_connection())(keys=keys, args=args)
        except Exception:  # a limiter that cannot count must not refuse, nor fail the request
            breaker.trip("counting calls")
            return {}
    else:
        answer = _step(keys, args)
    named = [hold_key, *(rule.key for rule in rules)]
    waits = zip(answer[::2], answer[1::2], strict=True)
    return {named[int(i)]: int(us) / 1_000_000 for i, us in waits}


def rate_release(*, rules: Sequence[Rule], entry: str, fail_open: bool = False) -> None:
    """Take the call `entry` out of `rules` before its window ends (a call in flight that
    ended, an attempt that turned out not to count). Best effort: if Redis does not
    answer, the entry leaves with its window. `fail_open`: a person waits, as for
    `rate_take`."""
    rules = _limiting(rules)
    if not rules:
        return
    keys, args = _keys(rules), ["release", *(_member(rule, entry) for rule in rules)]
    if fail_open:
        breaker = request_breaker()
        if breaker.open:
            return
        try:
            _script(request_connection())(keys=keys, args=args)
        except Exception:  # best effort; the request goes on
            breaker.trip("releasing a call")
        return
    try:
        _step(keys, args)
    except RateLimitUnavailable:
        pass


def rate_hold(*, key: str, seconds: float, add: bool = False) -> None:
    """Let `rate_take` count nothing under the hold `key` for `seconds` from now (Redis's
    clock), unless a longer hold stands; `add`: `seconds` more than what stands."""
    args = ["hold", max(1, math.ceil(seconds * 1000))]
    _step([key], args + (["add"] if add else []))


def _step(keys: list[str], args: list) -> list:
    try:
        return _script(redis_connection())(keys=keys, args=args)
    except RedisError as exc:
        raise RateLimitUnavailable(f"the rate limiter could not ask Redis: {exc}") from exc
