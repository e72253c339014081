"""RQ's side of the pipeline, read straight from Redis: queues, registries, workers.

Every lane of every stage, its started and scheduled registries, the
suspension flag and every registered worker are read in two pipelined round
trips, whatever the number of jobs. Key names come from RQ's own classes.
Lanes are summed per stage and per stage and priority.
"""

import re
from dataclasses import dataclass, field
from datetime import datetime

from redis import Redis
from rq.job import Job
from rq.queue import Queue
from rq.registry import ScheduledJobRegistry, StartedJobRegistry
from rq.suspension import WORKERS_SUSPENDED
from rq.utils import utcparse
from rq.worker import Worker
from rq.worker_registration import REDIS_WORKER_KEYS

from core.provider_breaker import breaker
from pipeline.models import StageAttempt
from pipeline.queues import PRIORITIES, priority_queue_names, queue_lane
from pipeline.stage_list import STAGES

# `dispatch.stage_job_id`: run-<run id>-<generation>-<stage>-<attempt>.
JOB_ID = re.compile(r"^run-(?P<run>[0-9a-f-]{36})-(?P<generation>\d+)-(?P<stage>[a-z_]+)-\d+$")


@dataclass(frozen=True)
class WorkerState:
    """An RQ worker registered in Redis, and what it works on now."""

    name: str
    queues: tuple[str, ...]
    state: str
    job_id: str | None
    run_id: str | None
    stage: str | None
    attempt: int | None
    attempt_started_at: datetime | None
    last_heartbeat: datetime | None
    started_at: datetime | None

    @property
    def stages(self) -> tuple[str, ...]:
        """The stages whose lanes the worker reads, in its order."""
        found = [lane.stage for lane in map(queue_lane, self.queues) if lane]
        return tuple(dict.fromkeys(found))

    @property
    def serves(self) -> str:
        """What the worker reads, for people: "extract, interactive first"."""
        lanes = [lane for lane in map(queue_lane, self.queues) if lane]
        others = [q for q in self.queues if queue_lane(q) is None]
        parts = [", ".join(self.stages)] if lanes else []
        if lanes:
            # stage_worker lists the lanes of the priority the worker prefers first.
            parts[0] += f", {lanes[0].priority} first"
        return "; ".join(parts + others)


@dataclass(frozen=True)
class QueueState:
    """Jobs of some lanes: waiting in them, in their started and scheduled registries,
    and the enqueue time of the oldest job at the head of one of them."""

    waiting: int = 0
    started: int = 0
    scheduled: int = 0
    head_enqueued_at: datetime | None = None

    def __add__(self, other: "QueueState") -> "QueueState":
        heads = [h for h in (self.head_enqueued_at, other.head_enqueued_at) if h is not None]
        return QueueState(
            waiting=self.waiting + other.waiting,
            started=self.started + other.started,
            scheduled=self.scheduled + other.scheduled,
            head_enqueued_at=min(heads) if heads else None,
        )


@dataclass(frozen=True)
class RedisState:
    # stage -> its lanes summed; (stage, priority) -> that priority's lanes summed.
    queues: dict[str, QueueState]
    priorities: dict[tuple[str, str], QueueState]
    workers: list[dict]
    suspended: bool
    # stage -> when its provider's pause ends (epoch seconds), for stages whose provider's
    # breaker (core/provider_breaker.py) has opened and not closed since.
    paused_until: dict[str, float] = field(default_factory=dict)


def read_redis_state(connection: Redis, now: datetime) -> RedisState:
    """Every lane, registry and worker: two pipelined round trips."""
    now_ts = now.timestamp()
    lanes = [
        (spec.name, priority, name)
        for spec in STAGES
        for priority in PRIORITIES
        for name in priority_queue_names(spec.name, priority)
    ]
    names = [name for _, _, name in lanes]
    with connection.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.llen(Queue.redis_queue_namespace_prefix + name)
            pipe.lindex(Queue.redis_queue_namespace_prefix + name, 0)
            # Entries of the started registry are scored by when they expire.
            pipe.zcount(StartedJobRegistry.key_template.format(name), now_ts, "+inf")
            pipe.zcard(ScheduledJobRegistry.key_template.format(name))
        providers = [spec for spec in STAGES if spec.provider]
        for spec in providers:
            pipe.hget(breaker(spec.provider).key, "until")
        pipe.exists(WORKERS_SUSPENDED)
        pipe.smembers(REDIS_WORKER_KEYS)
        replies = pipe.execute()
    per_queue = [replies[i : i + 4] for i in range(0, 4 * len(names), 4)]
    suspended, worker_keys = bool(replies[-2]), sorted(k.decode() for k in replies[-1])
    paused_until = {
        spec.name: float(until)
        for spec, until in zip(providers, replies[4 * len(names) : -2], strict=True)
        if until is not None
    }
    heads = [head.decode() if head else None for _, head, _, _ in per_queue]
    with connection.pipeline(transaction=False) as pipe:
        for head in heads:
            pipe.hget(Job.redis_job_namespace_prefix + (head or "-"), "enqueued_at")
        for key in worker_keys:
            pipe.hgetall(key)
        replies = pipe.execute()
    queues = {spec.name: QueueState() for spec in STAGES}
    priorities = {(spec.name, p): QueueState() for spec in STAGES for p in PRIORITIES}
    for (stage, priority, _), (waiting, _, started, scheduled), enqueued in zip(
        lanes, per_queue, replies[: len(names)], strict=True
    ):
        lane = QueueState(
            waiting=waiting,
            started=started,
            scheduled=scheduled,
            head_enqueued_at=utcparse(enqueued.decode()) if enqueued else None,
        )
        queues[stage] += lane
        priorities[stage, priority] += lane
    workers = []
    for key, data in zip(worker_keys, replies[len(names) :], strict=True):
        if data:  # an expired worker key: RQ forgets the worker
            fields = {k.decode(): v.decode() for k, v in data.items()}
            name = key.removeprefix(Worker.redis_worker_namespace_prefix)
            workers.append({"name": name, **fields})
    return RedisState(
        queues=queues,
        priorities=priorities,
        workers=workers,
        suspended=suspended,
        paused_until=paused_until,
    )


def _parse_time(value: str | None) -> datetime | None:
    return utcparse(value) if value else None


def workers_from(raw: list[dict]) -> tuple[WorkerState, ...]:
    """The workers `read_redis_state` found, each with the run, stage and attempt it is on."""
    parsed = []
    for data in raw:
        job_id = data.get("current_job") or None
        match = JOB_ID.match(job_id) if job_id else None
        parsed.append((data, job_id, match))
    # The attempts the busy workers are on: one query, bounded by the number of workers.
    busy = [(m["run"], job_id) for _, job_id, m in parsed if m]
    attempts = {}
    if busy:
        rows = StageAttempt.objects.filter(
            run_id__in=[run for run, _ in busy], job_id__in=[job for _, job in busy]
        ).values_list("job_id", "number", "started_at")
        attempts = {job: (number, started) for job, number, started in rows}
    workers = []
    for data, job_id, match in parsed:
        number, started = attempts.get(job_id, (None, None))
        workers.append(
            WorkerState(
                name=data["name"],
                queues=tuple(q for q in data.get("queues", "").split(",") if q),
                state=data.get("state", "?"),
                job_id=job_id,
                run_id=match["run"] if match else None,
                stage=match["stage"] if match else None,
                attempt=number,
                attempt_started_at=started,
                last_heartbeat=_parse_time(data.get("last_heartbeat")),
                started_at=_parse_time(data.get("birth")),
            )
        )
    return tuple(workers)
