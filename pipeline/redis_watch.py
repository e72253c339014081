"""Whether Redis answers, and whether it is still the same server, for the supervisor.

A worker that loses Redis mid-job quits and must not be restarted into a
crash loop while Redis is away; a worker that rode out a restart is no longer
registered in the new, empty server. The supervisor polls this watch to hold
restarts while Redis is down and to restart its workers once a new server is
up (each Redis start has its own run_id).
"""

import enum
import time

from redis import Redis
from redis.backoff import NoBackoff
from redis.exceptions import RedisError, ResponseError
from redis.retry import Retry

# Each check waits at most this long: the supervisor's loop must not stall.
CHECK_TIMEOUT_SECONDS = 1.0


class RedisEvent(enum.Enum):
    DOWN = "down"  # stopped answering
    BACK = "back"  # answers again, the same server (a network blip, a pause)
    RESTARTED = "restarted"  # a different server answers: a restart or a failover


def watch_connection(url: str) -> Redis:
    """A client for the watch: short timeouts and no retries, so a check is quick."""
    return Redis.from_url(
        url,
        socket_connect_timeout=CHECK_TIMEOUT_SECONDS,
        socket_timeout=CHECK_TIMEOUT_SECONDS,
        retry=Retry(NoBackoff(), 0),
    )


class RedisWatch:
    def __init__(self, connection: Redis, *, every: float = 1.0) -> None:
        self.connection = connection
        self.every = every
        self.up = True
        self.server_id: str | None = None
        # When it last went away, came back or was found restarted (time.monotonic()).
        self.changed_at = float("-inf")
        self._checked_at = float("-inf")

    def check(self, *, now: float | None = None, force: bool = False) -> RedisEvent | None:
        """Ask Redis (at most every `every` seconds unless `force`); what changed, if anything."""
        now = time.monotonic() if now is None else now
        if not force and now - self._checked_at < self.every:
            return None
        self._checked_at = now
        event = self._event()
        if event is not None:
            self.changed_at = now
        return event

    def _event(self) -> RedisEvent | None:
        try:
            server_id = self._server_id()
        except RedisError:
            if self.up:
                self.up = False
                return RedisEvent.DOWN
            return None
        was_up, previous = self.up, self.server_id
        self.up, self.server_id = True, server_id or previous
        if previous is not None and server_id is not None and server_id != previous:
            return RedisEvent.RESTARTED
        return None if was_up else RedisEvent.BACK

    def _server_id(self) -> str | None:
        try:
            return str(self.connection.info("server")["run_id"])
        except ResponseError:
            # INFO refused (some managed services): PING still says it answers.
            self.connection.ping()
            return None
