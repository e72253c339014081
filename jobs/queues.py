"""One Redis connection pool per process, and the RQ queues built on it.

Creating a client per enqueue would open a TCP connection (and run the
client's handshake) on every request; the pool keeps the accept path cheap.
"""

from functools import cache

from django.conf import settings
from redis import Redis
from rq import Queue


@cache
def _connection(url: str) -> Redis:
    return Redis.from_url(
        url, socket_connect_timeout=2, socket_timeout=10, health_check_interval=30
    )


def redis_connection() -> Redis:
    return _connection(settings.REDIS_URL)


def get_queue(name: str) -> Queue:
    return Queue(name, connection=redis_connection())
