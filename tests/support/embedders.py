"""Embedding providers that misbehave the way hosted ones do, for worker tests.

Workers load them through PAPERLANE_EMBEDDER; each wraps the real local
embedder, so everything but the provider's behaviour is the product's code.
"""

import hashlib
import json
import os
import signal
import time

from rq import get_current_job

from core.redis import redis_connection
from pipeline.errors import TransientError
from retrieval import provider_limit
from retrieval.embedding import HashingEmbedder
from retrieval.http_embedder import HttpEmbedder


def _calls(texts: list[str], tag: str) -> int:
    key = "test:embed:" + tag + ":" + hashlib.sha1(texts[0].encode()).hexdigest()
    return redis_connection().incr(key)


class SlowEmbedder(HashingEmbedder):
    """Takes EMBED_DELAY seconds a batch, like a remote model."""

    def embed(self, texts, *, max_seconds=None):
        time.sleep(float(os.environ.get("EMBED_DELAY", "0.5")))
        return super().embed(texts)


class FlakyEmbedder(HashingEmbedder):
    """Answers 'busy' (a 429) to the first EMBED_FAILURES calls for a batch."""

    def embed(self, texts, *, max_seconds=None):
        if _calls(texts, "flaky") <= int(os.environ.get("EMBED_FAILURES", "2")):
            raise TransientError("embedding provider answered 429 Too Many Requests")
        return super().embed(texts)


class AlwaysBusyEmbedder(HashingEmbedder):
    def embed(self, texts, *, max_seconds=None):
        raise TransientError("embedding provider answered 503 Service Unavailable")


class OwnErrorEmbedder(HashingEmbedder):
    """Fails with an error of its own kind, neither transient nor permanent by our terms."""

    def embed(self, texts, *, max_seconds=None):
        raise ValueError("the provider's own error")


class HangingEmbedder(HashingEmbedder):
    """Never returns and swallows every exception, RQ's timeout included."""

    def embed(self, texts, *, max_seconds=None):
        while True:
            try:
                time.sleep(0.5)
            except Exception:  # the point: it ignores the timeout too
                pass


class CrashingEmbedder(HashingEmbedder):
    """Takes its worker down, as a native library crash or the OOM killer would."""

    def embed(self, texts, *, max_seconds=None):
        os.kill(os.getpid(), signal.SIGKILL)


class HookedEmbedder(HashingEmbedder):
    """Calls `before_batch(texts)` before each batch: a test sets it to act while a stage
    is between two batches (cancel the run, delete its document)."""

    @staticmethod
    def before_batch(texts):
        pass

    def embed(self, texts, *, max_seconds=None):
        type(self).before_batch(texts)
        return super().embed(texts)


CALLS = "test:embed:calls"
# While this key is in Redis, RecordingEmbedder holds every answer.
PAUSED = "test:embed:paused"
# The stage jobs whose call RecordingEmbedder is holding now.
HOLDING = "test:embed:holding"


def holding_jobs() -> set[str]:
    """The ids of the stage jobs RecordingEmbedder holds inside a call, waiting on PAUSED."""
    return {job.decode() for job in redis_connection().smembers(HOLDING)}


def provider_calls() -> list[dict]:
    """Every call RecordingEmbedder answered, oldest first: its job id, pid and time."""
    return [json.loads(entry) for entry in redis_connection().lrange(CALLS, 0, -1)]


class RecordingEmbedder(HashingEmbedder):
    """Notes each call (the stage job making it, its process, when) in Redis before it
    answers, so a test can tell which worker called the provider, and when. A call takes
    EMBED_DELAY seconds (none unless set), and its answer waits while PAUSED is set: a
    test stops a worker inside a call, its batch not yet saved, for as long as it likes,
    and sees it there in HOLDING."""

    def embed(self, texts, *, max_seconds=None):
        time.sleep(float(os.environ.get("EMBED_DELAY", "0")))
        job = get_current_job()
        entry = {"job": job.id if job else "", "pid": os.getpid(), "at": time.time()}
        redis_connection().rpush(CALLS, json.dumps(entry))
        if redis_connection().exists(PAUSED):
            redis_connection().sadd(HOLDING, entry["job"])
            while redis_connection().exists(PAUSED):
                time.sleep(0.1)
            redis_connection().srem(HOLDING, entry["job"])
        return super().embed(texts)


class ShortWindowHttpEmbedder(HttpEmbedder):
    """The HTTP provider with its limits counted over EMBED_WINDOW_SECONDS instead of a
    minute, so that a worker test sees the window slide within seconds."""

    def __init__(self) -> None:
        provider_limit.WINDOW_SECONDS = float(os.environ["EMBED_WINDOW_SECONDS"])
        super().__init__()


class FailsAfterEmbedder(HashingEmbedder):
    """Answers the first EMBED_SUCCESSES calls, then '503 Service Unavailable' to every
    one after: a provider that goes down in the middle of a document."""

    def embed(self, texts, *, max_seconds=None):
        if redis_connection().incr("test:embed:answered") > int(os.environ["EMBED_SUCCESSES"]):
            raise TransientError("embedding provider answered 503 Service Unavailable")
        return super().embed(texts)
