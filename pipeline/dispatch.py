"""Deliver due stages to RQ. The database says what is due; Redis only delivers.

Stages are chained through RQ's callbacks: a stage job returns what the run waits
for next once its outcome has committed, and its `on_success` callback enqueues that
(the next stage, or the retry at its time); a job that raised instead (its worker
stopping gave the stage back) has its `on_failure` callback deliver what the run is
due for. Job ids are deterministic per (run, stage, attempt), so the accept path,
the callbacks and the sweeper (which repairs a callback that never ran: a worker
killed between the commit and its callback) can all ask for the same delivery and
only one job exists. Enqueue failures are logged, never raised: the sweeper repairs
them.
"""

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone
from redis import Redis
from redis.exceptions import RedisError

from core.redis import caller_connection, redis_connection
from pipeline import broker
from pipeline.lanes import lane_choose
from pipeline.models import ACTIVE_STATUSES, ImportRun, RunPriority
from pipeline.queues import is_served_queue, run_priority
from pipeline.stage_list import stage_spec

logger = logging.getLogger(__name__)

EXECUTE = broker.STAGE_FUNCTION
# Called by RQ in the worker when a stage job has returned, or has raised.
ON_SUCCESS = "pipeline.dispatch.on_stage_job_success"
ON_FAILURE = "pipeline.dispatch.on_stage_job_failure"
# A job marked queued for this long that sits in no lane (its worker died between taking
# it and starting it) is delivered again.
STRANDED_AFTER_SECONDS = 10


def stage_job_id(*, run_id: uuid.UUID | str, stage: str, attempt: int, generation: int = 0) -> str:
    return f"run-{run_id}-{generation}-{stage}-{attempt}"


def stage_enqueue(
    *,
    run_id: uuid.UUID | str,
    stage: str,
    attempt: int,
    generation: int = 0,
    organisation_id: uuid.UUID | str | None = None,
    priority: str = RunPriority.INTERACTIVE,
    at: datetime | None = None,
    in_request: bool = False,
) -> bool:
    """Enqueue one stage of a run (now, or at `at`). True if a new job was queued.

    The job goes to a lane of the stage's `priority` queues: the organisation's
    own while it holds jobs, else the shortest (pipeline/lanes.py).
    `in_request`: someone waits for the answer, so Redis gets a short time and is
    skipped while its breaker is open; the sweeper delivers what was not enqueued.
    """
    job_id = stage_job_id(run_id=run_id, stage=stage, attempt=attempt, generation=generation)
    connection, breaker = caller_connection(in_request=in_request)
    if connection is None:
        return False
    try:
        lane = lane_choose(
            connection=connection,
            stage=stage,
            priority=priority,
            organisation_id=str(organisation_id) if organisation_id else None,
        )
        # A retry's time is rounded up to RQ's whole seconds: never delivered before the
        # run is due (the claim would drop it).
        return broker.enqueue(
            connection=connection,
            lane=lane,
            job_id=job_id,
            func=EXECUTE,
            args=(str(run_id), stage),
            timeout=stage_spec(stage).timeout,
            on_success=ON_SUCCESS,
            on_failure=ON_FAILURE,
            at=at,
        )
    except RedisError:
        if breaker is not None:
            breaker.trip(f"enqueuing {job_id}")
        logger.warning("could not enqueue %s; the sweeper will retry", job_id, exc_info=True)
        return False


def current_job_id(run: ImportRun) -> str:
    """The job id of the delivery the run is waiting for now."""
    return stage_job_id(
        run_id=run.id, stage=run.stage, attempt=run.stage_attempts, generation=run.generation
    )


# The fields of a run that say which delivery it waits for, and where it goes.
DISPATCH_FIELDS = (
    "id",
    "stage",
    "stage_attempts",
    "generation",
    "due_at",
    "organisation_id",
    "source",
    "priority",
)


def delivery_of(run: ImportRun) -> dict:
    """The `stage_enqueue` arguments for the run's current stage, now or at its retry time."""
    return {
        "run_id": str(run.id),
        "stage": run.stage,
        "attempt": run.stage_attempts,
        "generation": run.generation,
        "organisation_id": str(run.organisation_id),
        "priority": run_priority(source=run.source, priority=run.priority),
        "at": run.due_at,
    }


def enqueue_current(run: ImportRun) -> bool:
    """Enqueue the run's current stage, now or at its retry time."""
    return stage_enqueue(**delivery_of(run))


def next_delivery(run: ImportRun) -> dict | None:
    """What the run waits for after a stage job, as the job's result for its callback."""
    if run.status not in ACTIVE_STATUSES or run.lease_owner:
        return None
    return delivery_of(run)


def on_stage_job_success(job: broker.RQJob, connection: Redis, result, *args, **kwargs) -> None:
    """RQ's `on_success` callback of a stage job, run in its worker once the job has
    returned: enqueue what the job says the run waits for next (the next stage now, or
    the retry at its time). Never raises, which would mark the job failed; a delivery
    that fails is the sweeper's to repair."""
    delivery = (result or {}).get("next")
    if delivery:
        _deliver(delivery)


def on_stage_job_failure(job: broker.RQJob, connection: Redis, *exc_info) -> None:
    """RQ's `on_failure` callback of a stage job that raised instead of returning (its
    worker, being stopped, gave the stage back): deliver what the run is due for now,
    as the sweeper would later. Never raises."""
    try:
        run_id = job.args[0]
        run = (
            ImportRun.objects.only("status", "lease_owner", *DISPATCH_FIELDS)
            .filter(id=run_id)
            .first()
        )
    except Exception:  # the database is away: the sweeper delivers it once it is back
        logger.warning("could not read the run of job %s after it failed", job.id, exc_info=True)
        return
    if run is not None and (delivery := next_delivery(run)):
        _deliver(delivery)


def _deliver(delivery: dict) -> None:
    try:
        stage_enqueue(**delivery)
    except Exception:  # stage_enqueue logs Redis' failures; anything else is logged here
        logger.exception("could not deliver %s; the sweeper will", delivery)


# --- What RQ knows about a run's delivery (the admin, "stuck" runs, requeue) ------------

# RQ statuses of a job that will still run without anyone's help.
WAITING_STATUSES = frozenset({"queued", "scheduled", "deferred"})


@dataclass(frozen=True)
class JobState:
    """The run's current stage job as RQ sees it.

    `status` is RQ's own (queued, scheduled, deferred, started, finished, failed,
    stopped, canceled), "missing" when Redis has no such job, or "none" when the run
    has ended and waits for no job.
    """

    job_id: str
    # The lane the job was enqueued to (its RQ `origin`), or the stage when Redis has no job.
    queue: str
    status: str
    # 1 = next to be taken; None when the job is not in its queue's list.
    position: int | None = None
    # The job is marked queued but sits neither in its queue nor in the list a
    # worker moves it to while taking it, and has for longer than a worker takes to
    # start a job it popped (STRANDED_AFTER_SECONDS): nothing would ever run it.
    stranded: bool = False
    # Marked queued and in no list, enqueued moments ago: a worker popped it and is
    # about to mark it started. Deleting it now would pull it from under that worker.
    being_taken: bool = False
    # Started, and still the current job of the live worker that started it.
    held: bool = False
    worker: str = ""
    scheduled_for: datetime | None = None
    enqueued_at: datetime | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None

    @property
    def waiting(self) -> bool:
        """True when the job will run (or is running) without an operator's help."""
        if self.status == "scheduled":
            # The scheduler moves it to its queue on time; long past that, it is not running.
            return not _long_ago(self.scheduled_for)
        if self.status in WAITING_STATUSES:
            return not self.stranded
        if self.status == "started":
            # A worker claims the run first thing; one that has not for this long died,
            # unless it still names the job as its own (the claim waits on a lock).
            return self.held or not _long_ago(self.started_at)
        return False

    def describe(self) -> str:
        """One line for operators: where the job is and since when."""
        text = {
            "queued": f"queued in {self.queue}"
            + (f" at position {self.position}" if self.position else ""),
            "scheduled": f"scheduled in {self.queue}"
            + (f" for {_local(self.scheduled_for)}" if self.scheduled_for else ""),
            "deferred": f"deferred in {self.queue}",
            "started": f"started by {self.worker or 'a worker'}"
            + (f" at {_local(self.started_at)}" if self.started_at else ""),
            "finished": "finished" + (f" at {_local(self.ended_at)}" if self.ended_at else ""),
            "failed": "failed in RQ" + (f" at {_local(self.ended_at)}" if self.ended_at else ""),
            "missing": f"missing from Redis (no job {self.job_id})",
            "none": "none: the run has ended",
        }.get(self.status, self.status)
        if self.stranded:
            text = f"marked queued but in no queue list of {self.queue}"
        elif self.being_taken:
            text = f"queued in {self.queue} and taken off it by a worker a moment ago"
        elif self.status == "started" and self.held and _long_ago(self.started_at):
            text += ", still its current job"
        elif self.status == "started" and not self.waiting:
            text += ", long ago, and the run was never claimed"
        elif self.status == "scheduled" and not self.waiting:
            text += ", long past (is the scheduler running?)"
        return text


def _long_ago(moment: datetime | None) -> bool:
    # The sweeper's rule for a job that should have moved on by now.
    limit = timedelta(seconds=settings.PAPERLANE_REDELIVER_AFTER_SECONDS)
    return moment is None or timezone.now() - moment > limit


def _queued_long(moment: datetime | None) -> bool:
    # The sweeper's rule for a job in no list: a worker that popped it marks it started
    # within milliseconds, so only one queued this long ago is left with nobody.
    limit = timedelta(seconds=STRANDED_AFTER_SECONDS)
    return moment is None or timezone.now() - moment > limit


def _local(value: datetime) -> str:
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S %Z")


def _awaited_job_id(run: ImportRun) -> str:
    # A worker holding the stage runs the job named in its lease; otherwise the run
    # waits for the delivery of its current try.
    if run.lease_owner:
        return run.lease_owner.partition("@")[0]
    return current_job_id(run)


def _read_state(connection: Redis, job_id: str, stage: str, *, again: bool = True) -> JobState:
    # The job's lane is in its hash; a job is never moved to another lane, so the read
    # of its lists (one MULTI) is of the lane it was found in.
    origin = broker.job_origin(connection, job_id)
    lane = origin or stage
    record = broker.job_record(connection, job_id, lane=lane)
    if record.origin != origin and again:
        # Deleted or enqueued again between the two reads: read the new job's lane.
        return _read_state(connection, job_id, stage, again=False)
    # In no list a worker reads: a queue no worker reads (named after a stage alone, or a
    # lane beyond a lowered PAPERLANE_LANES), or neither of its lane's lists for longer
    # than a worker that popped it takes to start it.
    queued = record.status == "queued"
    in_no_list = queued and record.position is None and not record.being_taken
    unserved = queued and not is_served_queue(lane)
    stranded = unserved or (in_no_list and _queued_long(record.enqueued_at))
    held = (
        record.status == "started"
        and bool(record.worker)
        and broker.worker_current_job(connection, record.worker) == job_id
    )
    return JobState(
        job_id=job_id,
        queue=lane,
        status=record.status,
        position=record.position,
        stranded=stranded,
        being_taken=in_no_list and not stranded,
        held=held,
        worker=record.worker,
        scheduled_for=record.scheduled_for,
        enqueued_at=record.enqueued_at,
        started_at=record.started_at,
        ended_at=record.ended_at,
    )


def job_state(run: ImportRun) -> JobState:
    """Where the run's current stage job is in RQ (a few Redis round trips: its lane, the
    job and that lane's lists, and the worker said to hold it)."""
    if run.status not in ACTIVE_STATUSES:
        return JobState(job_id="", queue=run.stage, status="none")
    return _read_state(redis_connection(), _awaited_job_id(run), run.stage)


def job_states(runs: list[ImportRun]) -> list[JobState]:
    """The jobs of many active runs in one pipelined round trip, without their queue
    positions: a job marked queued but sitting in no queue list looks waiting here
    (`job_state` of one run, and requeue, check the lists too)."""
    if not runs:
        return []
    job_ids = [_awaited_job_id(run) for run in runs]
    hashes = broker.jobs_read(redis_connection(), job_ids)
    return [
        JobState(
            job_id=job_id,
            queue=job.origin or run.stage,
            status=job.status,
            worker=job.worker,
            # A retry is scheduled for the run's due time (rounded up to a second).
            scheduled_for=run.due_at,
            enqueued_at=job.enqueued_at,
            started_at=job.started_at,
            ended_at=job.ended_at,
        )
        for run, job_id, job in zip(runs, job_ids, hashes, strict=True)
    ]


def runs_without_waiting_job(runs: list[ImportRun]) -> list[ImportRun]:
    """Those of `runs` (active, no lease) whose current job will not run by itself:
    missing from Redis, ended, or started or scheduled long ago. One round trip."""
    return [run for run, state in zip(runs, job_states(runs), strict=True) if not state.waiting]


@dataclass(frozen=True)
class Redelivery:
    """What delivering a run's stage again did: `queued` a new job or not, and why."""

    queued: bool
    note: str

    def __bool__(self) -> bool:
        return self.queued


def stage_redeliver(*, delivery: dict) -> Redelivery:
    """Enqueue a run's current stage again because its job was lost. A job RQ still
    keeps under the same id but that will not run (ended, stranded, started long ago by
    a worker that no longer runs it) is removed first; one that is waiting after all (a
    worker taking it this moment included) is left to run."""
    connection = redis_connection()
    job_id = stage_job_id(
        run_id=delivery["run_id"],
        stage=delivery["stage"],
        attempt=delivery["attempt"],
        generation=delivery["generation"],
    )
    try:
        state = _read_state(connection, job_id, delivery["stage"])
        if state.waiting:
            return Redelivery(False, f"its job is {state.describe()}: left to run")
        if state.status != "missing":
            broker.job_delete(connection, job_id)
    except RedisError as exc:
        logger.warning("could not redeliver %s; the sweeper will retry", job_id, exc_info=True)
        return Redelivery(False, f"Redis did not answer ({exc}); nothing was enqueued")
    removed = "" if state.status == "missing" else f"removed {job_id} ({state.describe()}), "
    if not stage_enqueue(**delivery):
        return Redelivery(
            False,
            f"{removed}but the enqueue did not happen (enqueued by someone else meanwhile, "
            "or Redis did not answer); the sweeper delivers it if it is lost",
        )
    try:
        lane = broker.job_origin(connection, job_id) or delivery["stage"]
    except RedisError:
        lane = delivery["stage"]
    when = " for its retry time" if delivery.get("at") and delivery["at"] > timezone.now() else ""
    return Redelivery(True, f"{removed}enqueued {job_id} again in {lane}{when}")
