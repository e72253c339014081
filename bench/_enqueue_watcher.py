"""RQ's enqueue time of every stage job, read from Redis while the job still exists."""

import threading
import time
from datetime import datetime

import redis
from _common import BENCH_REDIS_URL
from redis.exceptions import RedisError
from rq.utils import utcparse

from pipeline.queues import priority_queue_names

WATCH_INTERVAL = 0.01  # seconds between polls of Redis
WATCH_TAIL = 20  # newest entries read per queue and poll; far more than one interval adds


class EnqueueWatcher:
    """Keeps RQ's `enqueued_at` of every stage job it sees, from a background thread.

    Stage jobs are enqueued with result_ttl=0, so RQ deletes a job's hash the moment
    it succeeds and the enqueue time cannot be read afterwards. Every WATCH_INTERVAL
    this polls (one round trip) the newest entries of each interactive lane of the stages given, its
    intermediate list and its started registry, and reads `enqueued_at` of job ids it
    has not seen. A job enqueued, run and deleted between two polls is missed; the
    report says how many hand-offs were covered, and the thread's own CPU time.
    """

    def __init__(self, stages: list[str], *, enabled: bool = True) -> None:
        # Disabled, it reads nothing: its polls load Redis and the CPU, which a run that
        # measures cost must not carry (bench/pipeline.py's cost runs).
        self.enabled = enabled
        self.redis = redis.Redis.from_url(BENCH_REDIS_URL)
        # The interactive lanes of each stage (pipeline/queues.py names them): the bench's
        # documents are all API uploads; bulk lanes would only add Redis reads per poll.
        self.queues = [
            name for stage in stages for name in priority_queue_names(stage, "interactive")
        ]
        self.enqueued: dict[str, datetime] = {}
        self.cpu_seconds = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="enqueue-watcher", daemon=True)

    def __enter__(self) -> "EnqueueWatcher":
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        if self.enabled:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        started = time.thread_time()
        while not self._stop.wait(WATCH_INTERVAL):
            try:
                self._poll()
            except RedisError:
                pass  # a missed poll only lowers the coverage
        self.cpu_seconds = time.thread_time() - started

    def _poll(self) -> None:
        with self.redis.pipeline(transaction=False) as pipe:
            for queue in self.queues:
                pipe.lrange(f"rq:queue:{queue}", -WATCH_TAIL, -1)
                pipe.lrange(f"rq:queue:{queue}:intermediate", 0, -1)
                pipe.zrange(f"rq:wip:{queue}", 0, -1)  # members are "<job id>:<execution id>"
            listed = {raw.decode().split(":", 1)[0] for reply in pipe.execute() for raw in reply}
        new = [job_id for job_id in listed if job_id not in self.enqueued]
        if not new:
            return
        with self.redis.pipeline(transaction=False) as pipe:
            for job_id in new:
                pipe.hget(f"rq:job:{job_id}", "enqueued_at")
            for job_id, raw in zip(new, pipe.execute(), strict=True):
                if raw:
                    self.enqueued[job_id] = utcparse(raw.decode())
