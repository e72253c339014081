"""Where stage jobs sit in RQ now that each stage has many queues (its lanes)."""

from rq import Queue

from core.redis import redis_connection
from pipeline.broker import get_queue, job_origin
from pipeline.queues import stage_queue_names


def waiting_job_ids(stage: str) -> list[str]:
    """The job ids waiting in any lane of `stage`, lane by lane."""
    return [job_id for name in stage_queue_names(stage) for job_id in get_queue(name).job_ids]


def scheduled_job_ids(stage: str) -> list[str]:
    """The job ids in the scheduled registries of the lanes of `stage`."""
    return [
        job_id
        for name in stage_queue_names(stage)
        for job_id in get_queue(name).scheduled_job_registry.get_job_ids()
    ]


def waiting_count(stage: str) -> int:
    return sum(get_queue(name).count for name in stage_queue_names(stage))


def lane_of(job_id: str) -> Queue:
    """The queue (lane) the job was enqueued to."""
    origin = job_origin(redis_connection(), job_id)
    assert origin, f"no job {job_id} in Redis"
    return get_queue(origin)


# What `record_pick` jobs write: the labels in the order workers took them.
PICKS = "test:lanes:picks"


def record_pick(label: str) -> None:
    """A job that only notes that a worker took it."""
    redis_connection().rpush(PICKS, label)


def picks() -> list[str]:
    return [label.decode() for label in redis_connection().lrange(PICKS, 0, -1)]
