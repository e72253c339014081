"""What runs beside the burst: a sampler of queue lag and throughput, and the chaos.

Sampler, every second: the age of the oldest due run no worker holds (from the
database, `pipeline.lag.stage_lags`), the length of every RQ queue of
each stage (RQ's own set of queue keys, so any number of queues per stage is
summed), runs ended since the burst began, runs in flight, and quota overshoot.

Chaos: SIGKILLs a random stage worker (a child of our `run_workers`
supervisor, found through /proc) every few seconds and counts the workers the
supervisor starts again; makes the embedding provider fail (the flag file
bench/_embedders.py watches) for a while; FLUSHDB once on the workers' Redis
database. Both are threads with bounded loops, stopped by `stop()`.
"""

import os
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from django.db import close_old_connections, connections
from django.utils import timezone
from redis import Redis
from rq.queue import Queue

from bench._procs import is_stage_worker
from documents.models import Organisation
from pipeline.lag import stage_lags
from pipeline.models import ACTIVE_STATUSES, ImportRun
from pipeline.stage_list import STAGES

SAMPLE_SECONDS = 1.0


def stage_worker_pids(supervisor_pid: int) -> set[int]:
    """Live stage workers: children of the supervisor that are stage workers."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # fields[0] is proc(5)'s field 3
        alive = fields[0] != "Z"
        if int(fields[1]) == supervisor_pid and alive and is_stage_worker(cmdline.decode()):
            found.add(int(entry))
    return found


def queue_lengths(connection: Redis) -> dict[str, int]:
    """Jobs waiting per stage, summed over every RQ queue named after the stage
    (`rq:queue:<stage>` and any lane `rq:queue:<stage>...`), from RQ's set of queues."""
    prefix = Queue.redis_queue_namespace_prefix
    keys = sorted(k.decode() for k in connection.smembers(Queue.redis_queues_keys))
    names = {spec.name for spec in STAGES}
    owned = []
    for key in keys:
        name = key.removeprefix(prefix)
        stage = max((s for s in names if name.startswith(s)), key=len, default=None)
        if stage is not None and not name.endswith(":intermediate"):
            owned.append((stage, key))
    with connection.pipeline(transaction=False) as pipe:
        for _, key in owned:
            pipe.llen(key)
        lengths = pipe.execute()
    totals = dict.fromkeys(sorted(names), 0)
    for (stage, _), length in zip(owned, lengths, strict=True):
        totals[stage] += length
    return totals


@dataclass
class Sample:
    t: float  # seconds since the burst began
    db_lag_s: float  # age of the oldest due run no worker holds; 0 when none
    queued: int  # jobs waiting in the stage queues
    ended: int  # runs ended since the burst began
    active: int  # runs queued or processing
    throughput: float  # runs ended per second since the previous sample
    overshoot: int  # sum over organisations of max(0, used + reserved - limit)
    stage_lags: dict[str, float | None] = field(default_factory=dict)
    stage_queued: dict[str, int] = field(default_factory=dict)


class Sampler(threading.Thread):
    def __init__(
        self, redis: Redis, *, origin: float, organisation_ids: list[int], timeout: float
    ) -> None:
        super().__init__(name="burst-sampler", daemon=True)
        self.redis = redis
        # The burst's start, on the monotonic clock and as a database time.
        self.started = origin
        self.started_at = timezone.now() - timedelta(seconds=time.monotonic() - origin)
        self.organisation_ids = organisation_ids
        self.max_samples = int(timeout / SAMPLE_SECONDS) + 60  # bounded, whatever happens
        self.samples: list[Sample] = []
        self.errors = 0
        self._halt = threading.Event()

    def take(self) -> Sample:
        close_old_connections()
        lags = stage_lags()
        stage_queued = queue_lengths(self.redis)
        runs = ImportRun.objects.all()
        ended = runs.filter(finished_at__gte=self.started_at).count()
        active = runs.filter(status__in=ACTIVE_STATUSES).count()
        books = Organisation.objects.filter(id__in=self.organisation_ids).values_list(
            "page_limit", "pages_used", "pages_reserved"
        )
        t = time.monotonic() - self.started
        previous = self.samples[-1] if self.samples else None
        rate = (ended - previous.ended) / (t - previous.t) if previous and t > previous.t else 0.0
        return Sample(
            t=t,
            db_lag_s=max((lag for lag in lags.values() if lag is not None), default=0.0),
            queued=sum(stage_queued.values()),
            ended=ended,
            active=active,
            throughput=rate,
            overshoot=sum(max(0, u + r - limit) for limit, u, r in books),
            stage_lags=lags,
            stage_queued=stage_queued,
        )

    def run(self) -> None:
        try:
            while len(self.samples) < self.max_samples and not self._halt.is_set():
                try:
                    self.samples.append(self.take())
                except Exception:  # a Redis flush or a busy database must not end the chart
                    self.errors += 1
                self._halt.wait(SAMPLE_SECONDS)
        finally:
            connections.close_all()

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=10)


@dataclass
class ChaosPlan:
    kill_every: float  # seconds between SIGKILLs; 0: none
    outage_seconds: float  # how long the embedding provider answers 503
    outage_at: float  # share of the uploads ended when the outage starts
    flush_at: float  # share of the uploads ended when the workers' Redis db is flushed


@dataclass
class ChaosEvent:
    t: float
    what: str  # "kill", "restart", "outage_start", "outage_end", "flush"
    detail: str = ""


class Chaos(threading.Thread):
    """Kills, the provider outage and the flush, driven by the burst's progress."""

    TICK = 0.25

    def __init__(
        self,
        plan: ChaosPlan,
        *,
        supervisor_pid: int,
        redis: Redis,
        outage_flag: Path,
        progress: Callable[[], float],
        origin: float,
        timeout: float,
        seed: int = 9,
    ) -> None:
        super().__init__(name="burst-chaos", daemon=True)
        self.plan = plan
        self.supervisor_pid = supervisor_pid
        self.redis = redis
        self.outage_flag = outage_flag
        self.progress = progress  # share of the uploads whose runs ended, 0..1
        self.deadline = time.monotonic() + timeout
        self.rng = random.Random(seed)
        self.started = origin
        self.events: list[ChaosEvent] = []
        self.known: set[int] = set()
        self.kills = 0
        self.restarts = 0
        self.flushes = 0
        self.outage_started: float | None = None
        self.outage_ended: float | None = None
        self._halt = threading.Event()

    def _note(self, what: str, detail: str = "") -> None:
        self.events.append(ChaosEvent(time.monotonic() - self.started, what, detail))

    def _count_restarts(self) -> set[int]:
        """Stage workers alive now; the ones not seen before were (re)started by the supervisor."""
        current = stage_worker_pids(self.supervisor_pid)
        for pid in sorted(current - self.known):
            self.restarts += 1
            self._note("restart", str(pid))
        self.known |= current
        return current

    def run(self) -> None:
        self.known = stage_worker_pids(self.supervisor_pid)
        next_kill = time.monotonic() + self.plan.kill_every
        try:
            while not self._halt.is_set() and time.monotonic() < self.deadline:
                now = time.monotonic()
                current = self._count_restarts()
                if self.plan.kill_every > 0 and now >= next_kill and current:
                    victim = self.rng.choice(sorted(current))
                    try:
                        os.kill(victim, signal.SIGKILL)
                        self.kills += 1
                        self._note("kill", str(victim))
                    except ProcessLookupError:
                        pass
                    next_kill = now + self.plan.kill_every
                self._outage(now)
                self._flush()
                self._halt.wait(self.TICK)
        finally:
            self.end_outage()

    def await_restarts(self, timeout: float) -> None:
        """After stop(): give the supervisor `timeout` seconds to restart the last workers
        killed (it pauses before restarting one that died young)."""
        deadline = time.monotonic() + timeout
        while self.restarts < self.kills and time.monotonic() < deadline:
            self._count_restarts()
            time.sleep(self.TICK)

    def _outage(self, now: float) -> None:
        if self.plan.outage_seconds <= 0:
            return
        if self.outage_started is None and self.progress() >= self.plan.outage_at:
            self.outage_flag.touch()
            self.outage_started = now
            self._note("outage_start")
        elif self.outage_started is not None and self.outage_ended is None:
            if now - self.outage_started >= self.plan.outage_seconds:
                self.end_outage()

    def end_outage(self) -> None:
        if self.outage_started is not None and self.outage_ended is None:
            self.outage_flag.unlink(missing_ok=True)
            self.outage_ended = time.monotonic()
            self._note("outage_end")

    def _flush(self) -> None:
        if self.flushes == 0 and self.plan.flush_at <= 1 and self.progress() >= self.plan.flush_at:
            self.redis.flushdb()  # the workers' own database, never FLUSHALL
            self.flushes = 1
            self._note("flush")

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=10)
        self.end_outage()

    @property
    def outage_seconds(self) -> float:
        if self.outage_started is None:
            return 0.0
        return (self.outage_ended or time.monotonic()) - self.outage_started
