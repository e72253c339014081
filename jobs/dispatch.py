"""Deliver due stages to RQ. The database says what is due; Redis only delivers.

Job ids are deterministic per (run, stage, attempt), so the callback, the
sweeper and the accept path can all enqueue the same stage and only one job
exists. Enqueue failures are logged, never raised: the sweeper repairs them.
"""

import logging
import uuid

from redis.exceptions import RedisError
from rq.exceptions import DuplicateJobError

from jobs.pipeline import stage_spec
from jobs.queues import get_queue

logger = logging.getLogger(__name__)

EXECUTE = "jobs.engine.execute_stage"


def stage_job_id(*, run_id: uuid.UUID | str, stage: str, attempt: int) -> str:
    return f"run-{run_id}-{stage}-{attempt}"


def stage_enqueue(*, run_id: uuid.UUID | str, stage: str, attempt: int) -> bool:
    """Enqueue one stage of a run. Returns True if a new job was queued."""
    spec = stage_spec(stage)
    job_id = stage_job_id(run_id=run_id, stage=stage, attempt=attempt)
    try:
        queue = get_queue(spec.queue)
        queue.enqueue(
            EXECUTE,
            str(run_id),
            stage,
            job_id=job_id,
            unique=True,
            job_timeout=spec.timeout + 30,
            result_ttl=300,
            failure_ttl=24 * 3600,
        )
    except DuplicateJobError:
        return False
    except RedisError:
        logger.warning("could not enqueue %s; the sweeper will retry", job_id, exc_info=True)
        return False
    return True
