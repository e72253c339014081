"""The RQ queues of the stages: each stage's "lanes", PAPERLANE_LANES per priority, named
`<stage>.<priority>.<lane>` (`extract.bulk.3`).

Every question "which queues does this stage use" is answered here
(`stage_queue_names`, `queue_for`, `queue_stage`); pipeline/lanes.py decides which
lane a job goes to and in which order a worker takes them.
"""

from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from pipeline.models import RunPriority, RunSource, Stage
from pipeline.stage_list import STAGES

# Interactive first: the order workers and pages list them in.
PRIORITIES: tuple[str, ...] = (RunPriority.INTERACTIVE, RunPriority.BULK)


def lane_count() -> int:
    lanes = settings.PAPERLANE_LANES
    if not isinstance(lanes, int) or lanes < 1:
        raise ImproperlyConfigured(f"PAPERLANE_LANES must be a whole number >= 1, not {lanes!r}")
    return lanes


def run_priority(*, source: str, priority: str) -> str:
    """The priority a run's jobs are routed with: connector imports are always bulk."""
    if source == RunSource.CONNECTOR:
        return RunPriority.BULK
    if priority not in PRIORITIES:
        raise ValueError(f"unknown priority {priority!r}")
    return priority


def queue_for(stage: str, priority: str, lane: int) -> str:
    """The name of one lane: `extract.interactive.3`."""
    return f"{stage}.{priority}.{lane}"


def priority_queue_names(stage: str, priority: str) -> list[str]:
    """The lanes of one stage and priority, in lane order."""
    return [queue_for(stage, priority, lane) for lane in range(lane_count())]


def stage_queue_names(stage: str) -> list[str]:
    """Every queue of a stage: its interactive lanes, then its bulk lanes."""
    return [name for priority in PRIORITIES for name in priority_queue_names(stage, priority)]


def all_queue_names() -> list[str]:
    """Every queue of every stage, in pipeline order."""
    return [name for spec in STAGES for name in stage_queue_names(spec.name)]


@dataclass(frozen=True)
class Lane:
    stage: str
    priority: str
    number: int


def queue_lane(name: str) -> Lane | None:
    """What a queue name says: its stage, priority and lane (None for a foreign queue)."""
    stage, _, rest = name.partition(".")
    priority, _, number = rest.partition(".")
    if stage not in Stage.values or priority not in PRIORITIES or not number.isdigit():
        return None
    return Lane(stage, priority, int(number))


def is_served_queue(name: str) -> bool:
    """True for a queue the stage workers read (a lane of the current layout)."""
    lane = queue_lane(name)
    return lane is not None and lane.number < lane_count()


def queue_stage(name: str) -> str | None:
    """The stage a queue belongs to (None for a queue that is not a stage's)."""
    lane = queue_lane(name)
    return lane.stage if lane else None


def rq_queue_settings() -> dict[str, dict]:
    """django-rq's RQ_QUEUES for every lane of every stage, so its staff pages show them all."""
    return {
        name: {"URL": settings.REDIS_URL, "DEFAULT_TIMEOUT": spec.timeout}
        for spec in STAGES
        for name in stage_queue_names(spec.name)
    }
