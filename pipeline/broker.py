"""RQ's insides, known here only: its queues' and jobs' Redis keys, job hashes, the list a
worker moves a job to while taking it, the scheduled and started registries, worker
records, the suspension flag, the scheduler, the current job and its timeout.

Dispatch, the sweeper, the supervisor's workers and the dashboard ask this module; none
of them reads RQ's keys or imports its internal modules (tests/pipeline/test_broker.py
checks it), so an RQ upgrade that moves a key is mended here. The worker classes
(pipeline/rq_workers.py) extend RQ's public Worker classes.

Every read of many jobs or lanes is one pipelined round trip; a read that must not see a
job in flight between two lists is one MULTI.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache

from django.utils import timezone
from redis import Redis
from redis.commands.core import Script
from rq import Queue, get_current_job
from rq.exceptions import DuplicateJobError
from rq.intermediate_queue import IntermediateQueue
from rq.job import Callback, Job
from rq.registry import ScheduledJobRegistry, StartedJobRegistry
from rq.scheduler import RQScheduler
from rq.suspension import WORKERS_SUSPENDED
from rq.timeouts import JobTimeoutException
from rq.utils import utcparse
from rq.worker import Worker
from rq.worker_registration import REDIS_WORKER_KEYS

from core.redis import redis_connection

# What RQ raises in a job that outlived its `job_timeout`.
JobTimeout = JobTimeoutException
# What RQ hands a job's callbacks (`job.args` are the job's arguments).
RQJob = Job

# The stage jobs' function, as jobs name it.
STAGE_FUNCTION = "pipeline.engine.execute_stage"

# The fields of a job's hash that say where it is and since when.
JOB_FIELDS = ("status", "enqueued_at", "started_at", "ended_at", "worker_name", "origin")


def get_queue(name: str, *, connection: Redis | None = None) -> Queue:
    """The RQ queue (a stage's lane) of that name."""
    return Queue(name, connection=connection or redis_connection())


def queue_key(name: str) -> str:
    """The Redis list of a queue's waiting job ids."""
    return Queue.redis_queue_namespace_prefix + name


def _job_key(job_id: str) -> str:
    return Job.redis_job_namespace_prefix + job_id


def time_of(value: bytes | str | None) -> datetime | None:
    """A time as RQ stores it in a hash (None when absent)."""
    if not value:
        return None
    return utcparse(value.decode() if isinstance(value, bytes) else value)


# --- Jobs in and out ---------------------------------------------------------------------


def enqueue(
    *,
    connection: Redis,
    lane: str,
    job_id: str,
    func: str,
    args: tuple,
    timeout: int,
    on_success: str,
    on_failure: str,
    at: datetime | None = None,
) -> bool:
    """Put job `job_id` (`func(*args)`) on `lane`, now or scheduled for `at` (RQ keeps whole
    seconds: rounded up, never early). False when a job of that id exists already."""
    options = {
        "job_id": job_id,
        # RQ's hard limit; the engine records a timeout as a failed attempt.
        "job_timeout": timeout,
        # The outcome lives in the database; RQ need not keep job results.
        "result_ttl": 0,
        "failure_ttl": 7 * 24 * 3600,
        "on_success": Callback(on_success),
        "on_failure": Callback(on_failure),
    }
    target = get_queue(lane, connection=connection)
    try:
        if at is not None and at > timezone.now():
            if Job.exists(job_id, connection=connection):
                return False
            at = at.replace(microsecond=0) + timedelta(seconds=1)
            target.enqueue_at(at, func, *args, **options)
        else:
            target.enqueue(func, *args, unique=True, **options)
    except DuplicateJobError:
        return False
    return True


def current_job() -> tuple[str, str] | None:
    """(job id, worker name) of the job this process runs now, None outside a job."""
    job = get_current_job()
    return None if job is None else (job.id, job.worker_name or "")


def job_run_and_stage(job: Job) -> tuple[str | None, str | None]:
    """(run id, stage) of a stage job (pipeline.engine.execute_stage's arguments); Nones
    for any other job."""
    args = job.args
    if job.func_name != STAGE_FUNCTION or len(args) != 2:
        return None, None
    return str(args[0]), str(args[1])


def job_put_back(connection: Redis, lane: str, job_id: str) -> None:
    """Put a job a worker has just taken (and not started) back at the head of its lane,
    where the next worker to read the lane takes it first."""
    connection.lpush(queue_key(lane), job_id)


def job_origin(connection: Redis, job_id: str) -> str | None:
    """The lane a job was enqueued to, from its hash; None when Redis has no such job."""
    origin = connection.hget(_job_key(job_id), "origin")
    return origin.decode() if origin else None


def job_delete(connection: Redis, job_id: str) -> None:
    """Delete a job and take its id out of its lane and registries (found from its hash)."""
    job = Job(job_id, connection=connection)
    job.origin = job_origin(connection, job_id) or ""
    job.delete(remove_from_queue=bool(job.origin))


@dataclass(frozen=True)
class JobHash:
    """What a job's hash says of it."""

    status: str  # RQ's own (queued, scheduled, deferred, started, ...), or "missing"
    origin: str | None  # the lane it was enqueued to
    worker: str
    enqueued_at: datetime | None
    started_at: datetime | None
    ended_at: datetime | None


def _text(value: bytes | None) -> str | None:
    return value.decode() if value else None


def _job_hash(values: list) -> JobHash:
    status, enqueued, started, ended, worker, origin = values
    return JobHash(
        status=_text(status) or "missing",
        origin=_text(origin),
        worker=_text(worker) or "",
        enqueued_at=time_of(enqueued),
        started_at=time_of(started),
        ended_at=time_of(ended),
    )


def jobs_read(connection: Redis, job_ids: Sequence[str]) -> list[JobHash]:
    """Each job's hash: one round trip."""
    with connection.pipeline(transaction=False) as pipe:
        for job_id in job_ids:
            pipe.hmget(_job_key(job_id), *JOB_FIELDS)
        return [_job_hash(values) for values in pipe.execute()]


@dataclass(frozen=True)
class JobRecord(JobHash):
    """A job as Redis holds it at one moment: its hash, where its id is, when it is due."""

    # 1 = next to be taken; None when the id is not in its lane's list.
    position: int | None
    # The id is in the list a worker moves a job to while taking it.
    being_taken: bool
    scheduled_for: datetime | None


def job_record(connection: Redis, job_id: str, *, lane: str) -> JobRecord:
    """Job `job_id` as one MULTI sees it: its hash, and its place in the lists of `lane`
    (the lane its hash names), so a worker moving it between them cannot make it look lost."""
    key = queue_key(lane)
    with connection.pipeline(transaction=True) as pipe:
        pipe.hmget(_job_key(job_id), *JOB_FIELDS)
        pipe.lpos(key, job_id)
        pipe.lpos(IntermediateQueue.get_intermediate_queue_key(key), job_id)
        pipe.zscore(ScheduledJobRegistry.key_template.format(lane), job_id)
        values, index, taking, at = pipe.execute()
    return JobRecord(
        **vars(_job_hash(values)),
        position=None if index is None else index + 1,
        being_taken=taking is not None,
        scheduled_for=datetime.fromtimestamp(at, tz=UTC) if at is not None else None,
    )


def jobs_in_no_list(
    connection: Redis,
    queued: Sequence[tuple[str, str]],
    *,
    served: Callable[[str], bool],
    first_seen_for: timedelta,
) -> set[str]:
    """Of the job ids given with the lane they were enqueued to, those Redis marks queued
    but that sit in no list a worker reads: in a lane no worker serves (`served` False),
    or neither in their lane nor in the list a worker moves a job to while taking it, or
    in that list for longer than `first_seen_for` since it was first seen there (its
    worker died between taking it and starting it)."""
    if not queued:
        return set()
    # One MULTI: a worker moving the id between the two lists (and marking the job
    # started) cannot fall between the reads and make a taken job look lost.
    with connection.pipeline(transaction=True) as pipe:
        for job_id, origin in queued:
            key = queue_key(origin)
            pipe.hmget(_job_key(job_id), "status", "origin")
            pipe.lpos(key, job_id)
            pipe.lpos(IntermediateQueue.get_intermediate_queue_key(key), job_id)
        answers = pipe.execute()
    stranded = set()
    for (job_id, origin), (status, now_origin), in_queue, being_taken in zip(
        queued, answers[0::3], answers[1::3], answers[2::3], strict=True
    ):
        # A job enqueued again (to another lane) between the reads is left for later.
        if status != b"queued" or now_origin != origin.encode():
            continue
        if not served(origin):
            stranded.add(job_id)
        elif in_queue is None and (
            being_taken is None or _left_half_taken(connection, origin, job_id, first_seen_for)
        ):
            stranded.add(job_id)
    return stranded


def _left_half_taken(connection: Redis, lane: str, job_id: str, after: timedelta) -> bool:
    """A live worker moves a job out of the list it takes it into within milliseconds; one
    still there `after` a pass first saw it belonged to a worker that died between taking
    it and starting it (a host lost). Such a job is taken out of that list too: RQ's own
    clean-up would otherwise fail the job delivered again."""
    taking = IntermediateQueue(queue_key(lane), connection=connection)
    if taking.set_first_seen(job_id):
        return False
    first_seen = taking.get_first_seen(job_id)
    if first_seen is None or timezone.now() - first_seen < after:
        return False
    taking.remove(job_id)
    connection.delete(taking.get_first_seen_key(job_id))
    return True


# KEYS: the holder->lane hash, then the lanes' lists. ARGV: the holder, and the lane to
# start from when comparing lengths. One round trip, atomic: no two enqueues pick at once.
_KEEP_OR_SHORTEST = """
local lanes = #KEYS - 1
local kept = tonumber(redis.call('HGET', KEYS[1], ARGV[1]))
if kept and kept >= 0 and kept < lanes and redis.call('LLEN', KEYS[kept + 2]) > 0 then
    return kept
end
local best, shortest = 0, -1
for step = 0, lanes - 1 do
    local lane = (tonumber(ARGV[2]) + step) % lanes
    local length = redis.call('LLEN', KEYS[lane + 2])
    if shortest < 0 or length < shortest then
        best, shortest = lane, length
    end
end
redis.call('HSET', KEYS[1], ARGV[1], best)
return best
"""


def lane_keep_or_shortest(
    *, connection: Redis, lanes: list[str], holders: str, holder: str, start: int
) -> str:
    """Of `lanes`, the one `holder` was given last (kept in the hash `holders`) while it
    still holds jobs, else the one with the fewest waiting (from `start` on, the first of
    equals), which is then the holder's."""
    keys = [holders, *(queue_key(name) for name in lanes)]
    return lanes[int(_keeper(connection)(keys=keys, args=[holder, start]))]


@cache
def _keeper(connection: Redis) -> Script:
    # Sent once per connection as EVALSHA; Redis keeps the script.
    return connection.register_script(_KEEP_OR_SHORTEST)


# --- Workers -----------------------------------------------------------------------------


def worker_current_job(connection: Redis, worker: str) -> str | None:
    """The job a worker's record says it runs, None if it runs none or is gone."""
    current = connection.hget(Worker.redis_worker_namespace_prefix + worker, "current_job")
    return current.decode() if current else None


def scheduler_run(queue_names: list[str], *, interval: int, hostname: str, level: str) -> None:
    """Move scheduled jobs (retries waiting out their backoff) onto their lanes, until stopped."""
    scheduler = RQScheduler(
        queue_names, connection=redis_connection(), interval=interval, logging_level=level
    )
    scheduler.hostname = hostname
    scheduler.acquire_locks()
    scheduler.work()


# --- What the dashboard shows -----------------------------------------------------------


@dataclass(frozen=True)
class LaneCounts:
    """Jobs of one lane: waiting in it, started, scheduled, and the enqueue time of the
    job at its head."""

    waiting: int = 0
    started: int = 0
    scheduled: int = 0
    head_enqueued_at: datetime | None = None


@dataclass(frozen=True)
class WorkerRecord:
    """A worker registered in Redis, as its record says."""

    name: str
    queues: tuple[str, ...]  # in the order it reads them
    state: str
    current_job: str | None
    last_heartbeat: datetime | None
    started_at: datetime | None


@dataclass(frozen=True)
class RQState:
    lanes: dict[str, LaneCounts]
    workers: list[WorkerRecord]
    suspended: bool


def rq_state(connection: Redis, lanes: Sequence[str], *, now: datetime) -> RQState:
    """Every lane's counts, the suspension flag and every registered worker: two pipelined
    round trips, whatever the number of jobs."""
    now_ts = now.timestamp()
    with connection.pipeline(transaction=False) as pipe:
        for name in lanes:
            pipe.llen(queue_key(name))
            pipe.lindex(queue_key(name), 0)
            # Entries of the started registry are scored by when they expire.
            pipe.zcount(StartedJobRegistry.key_template.format(name), now_ts, "+inf")
            pipe.zcard(ScheduledJobRegistry.key_template.format(name))
        pipe.exists(WORKERS_SUSPENDED)
        pipe.smembers(REDIS_WORKER_KEYS)
        replies = pipe.execute()
    per_lane = [replies[i : i + 4] for i in range(0, 4 * len(lanes), 4)]
    suspended, worker_keys = bool(replies[-2]), sorted(k.decode() for k in replies[-1])
    heads = [head.decode() if head else None for _, head, _, _ in per_lane]
    with connection.pipeline(transaction=False) as pipe:
        for head in heads:
            pipe.hget(_job_key(head or "-"), "enqueued_at")
        for key in worker_keys:
            pipe.hgetall(key)
        replies = pipe.execute()
    counts = {
        name: LaneCounts(
            waiting=waiting,
            started=started,
            scheduled=scheduled,
            head_enqueued_at=time_of(enqueued),
        )
        for name, (waiting, _, started, scheduled), enqueued in zip(
            lanes, per_lane, replies[: len(lanes)], strict=True
        )
    }
    workers = []
    for key, data in zip(worker_keys, replies[len(lanes) :], strict=True):
        if not data:  # an expired worker key: RQ forgets the worker
            continue
        fields = {k.decode(): v.decode() for k, v in data.items()}
        workers.append(
            WorkerRecord(
                name=key.removeprefix(Worker.redis_worker_namespace_prefix),
                queues=tuple(q for q in fields.get("queues", "").split(",") if q),
                state=fields.get("state", "?"),
                current_job=fields.get("current_job") or None,
                last_heartbeat=time_of(fields.get("last_heartbeat")),
                started_at=time_of(fields.get("birth")),
            )
        )
    return RQState(lanes=counts, workers=workers, suspended=suspended)
