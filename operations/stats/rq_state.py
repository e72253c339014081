"""RQ's side of the pipeline for the dashboard: queues, registries, workers.

Every lane of every stage, its started and scheduled registries, the suspension flag
and every registered worker come from pipeline/broker.py (the one module that knows
RQ's keys), in two pipelined round trips whatever the number of jobs. Lanes are summed
per stage and per stage and priority.
"""

import re
from dataclasses import dataclass, field
from datetime import datetime

from redis import Redis

from core.provider_breaker import breaker
from pipeline.broker import WorkerRecord, rq_state
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
    workers: list[WorkerRecord]
    suspended: bool
    # stage -> when its provider's pause ends (epoch seconds), for stages whose provider's
    # breaker (core/provider_breaker.py) has opened and not closed since.
    paused_until: dict[str, float] = field(default_factory=dict)


def read_redis_state(connection: Redis, now: datetime) -> RedisState:
    """Every lane, registry and worker (pipeline/broker.py: two pipelined round trips),
    and the pause of each stage's provider (one more)."""
    lanes = [
        (spec.name, priority, name)
        for spec in STAGES
        for priority in PRIORITIES
        for name in priority_queue_names(spec.name, priority)
    ]
    state = rq_state(connection, [name for _, _, name in lanes], now=now)
    providers = [spec for spec in STAGES if spec.provider]
    with connection.pipeline(transaction=False) as pipe:
        for spec in providers:
            pipe.hget(breaker(spec.provider).key, "until")
        untils = pipe.execute()
    paused_until = {
        spec.name: float(until)
        for spec, until in zip(providers, untils, strict=True)
        if until is not None
    }
    queues = {spec.name: QueueState() for spec in STAGES}
    priorities = {(spec.name, p): QueueState() for spec in STAGES for p in PRIORITIES}
    for stage, priority, name in lanes:
        counts = state.lanes[name]
        lane = QueueState(
            waiting=counts.waiting,
            started=counts.started,
            scheduled=counts.scheduled,
            head_enqueued_at=counts.head_enqueued_at,
        )
        queues[stage] += lane
        priorities[stage, priority] += lane
    return RedisState(
        queues=queues,
        priorities=priorities,
        workers=state.workers,
        suspended=state.suspended,
        paused_until=paused_until,
    )


def workers_from(records: list[WorkerRecord]) -> tuple[WorkerState, ...]:
    """The workers `read_redis_state` found, each with the run, stage and attempt it is on."""
    parsed = []
    for record in records:
        job_id = record.current_job
        match = JOB_ID.match(job_id) if job_id else None
        parsed.append((record, job_id, match))
    # The attempts the busy workers are on: one query, bounded by the number of workers.
    busy = [(m["run"], job_id) for _, job_id, m in parsed if m]
    attempts = {}
    if busy:
        rows = StageAttempt.objects.filter(
            run_id__in=[run for run, _ in busy], job_id__in=[job for _, job in busy]
        ).values_list("job_id", "number", "started_at")
        attempts = {job: (number, started) for job, number, started in rows}
    workers = []
    for record, job_id, match in parsed:
        number, started = attempts.get(job_id, (None, None))
        workers.append(
            WorkerState(
                name=record.name,
                queues=record.queues,
                state=record.state,
                job_id=job_id,
                run_id=match["run"] if match else None,
                stage=match["stage"] if match else None,
                attempt=number,
                attempt_started_at=started,
                last_heartbeat=record.last_heartbeat,
                started_at=record.started_at,
            )
        )
    return tuple(workers)
