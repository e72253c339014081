"""A breaker for an outside provider that every worker shares (the embedding provider).

When calls to the provider keep failing, the workers of the stage that calls it stop
taking that stage's jobs for a while instead of spending a try of every waiting run on
a provider that is down: the runs stay queued with their retry budget whole, and an
outage that outlasts the retries no longer sends them to the dead letter. The pause
starts after PAUSE_AFTER_FAILURES failures in a row (across every worker and host),
lasts PAUSE_SECONDS and doubles each time it opens again, up to PAUSE_MAX_SECONDS.
When it ends, the next job is the
probe: a success closes the breaker, a failure opens it again at once, for longer.

Searches embed their query through the same provider and count into the same breaker
(with the short Redis client a request uses): a query whose embedding fails or times
out is a failure like a worker's, and while the breaker is open, or opened and not yet
closed by a success, searches do not call the provider at all (`searches_skip`).

The state is one Redis hash per provider. Reading it costs the stage's workers one
command per job; a worker that cannot read it takes jobs as usual (the stage's own
retries still cover a failing provider).
"""

import logging
import time
from dataclasses import dataclass
from functools import cache

from redis.exceptions import RedisError

from core.redis import caller_connection, redis_connection

logger = logging.getLogger(__name__)

KEY = "paperlane:breaker:{name}"
# A provider that fails this many calls in a row (every worker counted) pauses its
# stage's workers for the pause, doubled each time it fails again after one, up to the
# longest.
PAUSE_AFTER_FAILURES = 3
PAUSE_SECONDS = 1.0
PAUSE_MAX_SECONDS = 5.0

# KEYS: the hash. ARGV: now, failures that open it, first pause, longest pause, TTL.
# Returns the pause it opened for, or 0. While it is open, a failure says nothing new
# (a call begun before it opened); after a pause ("opens" > 0 and no success since), a
# single failure opens it again.
_FAILED = """
if tonumber(ARGV[1]) < tonumber(redis.call('HGET', KEYS[1], 'until') or '0') then
    return '0'
end
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
local opens = tonumber(redis.call('HGET', KEYS[1], 'opens') or '0')
local pause = 0
if opens > 0 or failures >= tonumber(ARGV[2]) then
    pause = math.min(tonumber(ARGV[3]) * 2 ^ opens, tonumber(ARGV[4]))
    redis.call('HSET', KEYS[1], 'until', tonumber(ARGV[1]) + pause, 'opens', opens + 1,
               'failures', 0)
end
redis.call('EXPIRE', KEYS[1], ARGV[5])
return tostring(pause)
"""


@dataclass(frozen=True)
class BreakerState:
    """A breaker's hash as read: failures in a row while it is closed, how many times it
    opened since the last success, and when its pause ends (epoch seconds)."""

    failures: int
    opens: int
    until: float | None

    def out(self, now: float) -> bool:
        """Open, or opened and no call has gone through since: an outage."""
        return self.opens > 0 or (self.until or 0) > now

    def paused_for(self, now: float) -> float:
        return max((self.until or 0) - now, 0.0)


@dataclass
class ProviderBreaker:
    name: str
    # This process has seen the breaker not closed: its next success closes it (a
    # success when it was closed costs no command).
    _failing: bool = False

    @property
    def failing(self) -> bool:
        """Whether this process has seen the provider fail, or its breaker not closed,
        since its last success."""
        return self._failing

    @property
    def key(self) -> str:
        return KEY.format(name=self.name)

    def failed(self, *, in_request: bool = False) -> float:
        """Count a failed call; returns the pause it opened, or 0. `in_request`: a person
        waits (a search), so the request's Redis client, with its short timeout."""
        self._failing = True
        max_pause = PAUSE_MAX_SECONDS
        client, request = caller_connection(in_request=in_request)
        if client is None:
            return 0.0
        try:
            pause = float(
                client.eval(
                    _FAILED,
                    1,
                    self.key,
                    time.time(),
                    PAUSE_AFTER_FAILURES,
                    PAUSE_SECONDS,
                    max_pause,
                    int(max_pause * 4 + 60),
                )
            )
        except RedisError:
            if request is not None:
                request.trip(f"counting a failure of {self.name}")
            logger.warning("could not count a failure of %s in Redis", self.name, exc_info=True)
            return 0.0
        if pause:
            logger.warning(
                "%s keeps failing: its stage's workers pause for %.0f s, then try one job",
                self.name,
                pause,
            )
        return pause

    def succeeded(self, *, in_request: bool = False) -> None:
        """A call went through: the breaker closes (one command, only if it was failing)."""
        if not self._failing:
            return
        client, request = caller_connection(in_request=in_request)
        if client is None:
            return
        try:
            client.delete(self.key)
            self._failing = False
        except RedisError:
            if request is not None:
                request.trip(f"closing the {self.name} breaker")
            logger.warning("could not close the %s breaker", self.name, exc_info=True)

    def state(self, client) -> BreakerState | None:
        """The breaker's hash through `client`, one command; None when there is none (closed,
        no failure since the last success). RedisError if Redis does not answer."""
        until, opens, failures = client.hmget(self.key, "until", "opens", "failures")
        if until is None and opens is None and failures is None:
            return None
        until = float(until) if until is not None else None
        return BreakerState(failures=int(failures or 0), opens=int(opens or 0), until=until)

    def searches_skip(self) -> bool:
        """Whether a search should not call the provider: its breaker is open, or it
        opened and no call has succeeded since (a worker's probe, or the hash expiring
        PAUSE_MAX_SECONDS * 4 + 60 s after the last failure, closes it). One command on
        the request's client; Redis away says no (the search's own budget bounds the
        call)."""
        client, request = caller_connection(in_request=True)
        if client is None:
            return False
        try:
            state = self.state(client)
        except RedisError:
            request.trip(f"reading the {self.name} breaker")
            return False
        if state is None:
            return False
        self._failing = True
        return state.out(time.time())

    def paused_for(self) -> float:
        """Seconds until the stage's jobs may be taken again (0: take them now)."""
        try:
            state = self.state(redis_connection())
        except RedisError:
            return 0.0
        if state is None:
            return 0.0
        self._failing = True
        return state.paused_for(time.time())


@cache
def breaker(name: str) -> ProviderBreaker:
    """This process's handle on the named breaker (its state is in Redis)."""
    return ProviderBreaker(name)
