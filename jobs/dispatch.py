"""Deliver due stages to RQ. The database says what is due; Redis only delivers.

Job ids are deterministic per (run, stage, attempt), so the accept path, the
`on_success` callback and the sweeper can all ask for the same delivery and
only one job exists. Enqueue failures are logged, never raised: the sweeper
repairs them.
"""

import logging
import uuid
from datetime import datetime, timedelta

from django.utils import timezone
from redis.exceptions import RedisError
from rq import Callback
from rq.exceptions import DuplicateJobError
from rq.job import Job

from jobs.models import ACTIVE_STATUSES, ImportRun
from jobs.pipeline import stage_spec
from jobs.queues import get_queue

logger = logging.getLogger(__name__)

EXECUTE = "jobs.engine.execute_stage"
ON_SUCCESS = Callback("jobs.dispatch.on_stage_job_success", timeout=30)


def stage_job_id(*, run_id: uuid.UUID | str, stage: str, attempt: int, generation: int = 0) -> str:
    return f"run-{run_id}-{generation}-{stage}-{attempt}"


def _job_options(stage: str, job_id: str) -> dict:
    spec = stage_spec(stage)
    return {
        "job_id": job_id,
        # RQ's hard limit; the engine records a timeout as a failed attempt.
        "job_timeout": spec.timeout,
        # The outcome lives in StageAttempt rows; RQ need not keep job results.
        "result_ttl": 0,
        "failure_ttl": 7 * 24 * 3600,
        "on_success": ON_SUCCESS,
    }


def stage_enqueue(
    *,
    run_id: uuid.UUID | str,
    stage: str,
    attempt: int,
    generation: int = 0,
    at: datetime | None = None,
) -> bool:
    """Enqueue one stage of a run (now, or at `at`). True if a new job was queued."""
    job_id = stage_job_id(run_id=run_id, stage=stage, attempt=attempt, generation=generation)
    queue = get_queue(stage_spec(stage).queue)
    try:
        if at is not None and at > timezone.now():
            if Job.exists(job_id, connection=queue.connection):
                return False
            # RQ keeps whole seconds for scheduled times; round up so the job is
            # never delivered before the run is due (the claim would drop it).
            at = at.replace(microsecond=0) + timedelta(seconds=1)
            queue.enqueue_at(at, EXECUTE, str(run_id), stage, **_job_options(stage, job_id))
        else:
            queue.enqueue(EXECUTE, str(run_id), stage, unique=True, **_job_options(stage, job_id))
    except DuplicateJobError:
        return False
    except RedisError:
        logger.warning("could not enqueue %s; the sweeper will retry", job_id, exc_info=True)
        return False
    return True


def current_job_id(run: ImportRun) -> str:
    """The job id of the delivery the run is waiting for now."""
    return stage_job_id(
        run_id=run.id, stage=run.stage, attempt=run.stage_attempts, generation=run.generation
    )


# The fields of a run that say which delivery it waits for.
DISPATCH_FIELDS = ("id", "stage", "stage_attempts", "generation", "due_at")


def delivery_of(run: ImportRun) -> dict:
    """The `stage_enqueue` arguments for the run's current stage, now or at its retry time."""
    return {
        "run_id": str(run.id),
        "stage": run.stage,
        "attempt": run.stage_attempts,
        "generation": run.generation,
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


def on_stage_job_success(job: Job, connection, result, *args, **kwargs) -> None:
    """RQ `on_success` callback: enqueue the next stage (or the retry) the job committed.

    The job returns what its own transaction made due, so no second read is
    needed. RQ runs this before it marks the job finished: a worker killed here
    leaves a started job behind and may enqueue twice; the deterministic job id
    makes the second enqueue a duplicate and the claim guard drops a re-run.
    """
    delivery = (result or {}).get("next")
    if delivery:
        stage_enqueue(**delivery)
