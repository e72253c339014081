"""The pipeline as data: one line per stage, in order.

Adding a stage is writing its function in `jobs/stages/` and adding one line
here. Queues, the django-rq queue settings and the workers `run_workers`
starts are all derived from this list; timeouts and concurrency are
settings with these defaults.

Each stage has a fixed set of RQ queues, its "lanes": PAPERLANE_LANES per
priority, named `<stage>.<priority>.<lane>` (`extract.bulk.3`). Every question
"which queues does this stage use" is answered here (`stage_queue_names`,
`queue_for`, `queue_stage`); jobs/lanes.py decides which lane a job goes to
and in which order a worker takes them.
"""

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from jobs import isolation
from jobs.models import RunPriority, RunSource, Stage
from jobs.stages import create, embed, extract, settle, store
from jobs.stages.context import StageContext


@dataclass(frozen=True)
class StageSpec:
    name: str
    run: Callable[[StageContext], None]
    default_timeout: int
    default_concurrency: int
    default_bulk_concurrency: int = 0
    # Run once when a worker of the stage starts, so no document pays for it.
    warm_up: Callable[[], None] | None = None
    # The outside provider the stage calls, by its breaker's name (jobs/breaker.py): the
    # stage's workers take none of its jobs while that provider keeps failing.
    provider: str | None = None

    @property
    def timeout(self) -> int:
        return settings.PAPERLANE_STAGE_TIMEOUTS.get(self.name, self.default_timeout)

    @property
    def concurrency(self) -> int:
        """Workers that take interactive work first."""
        return settings.PAPERLANE_STAGE_CONCURRENCY.get(self.name, self.default_concurrency)

    @property
    def bulk_concurrency(self) -> int:
        """Workers that take bulk work first."""
        return settings.PAPERLANE_STAGE_BULK_CONCURRENCY.get(
            self.name, self.default_bulk_concurrency
        )

    def workers(self, priority: str) -> int:
        """Workers of this stage that take `priority` work first."""
        return self.concurrency if priority == RunPriority.INTERACTIVE else self.bulk_concurrency


STAGES: tuple[StageSpec, ...] = (
    StageSpec(Stage.CREATE, create.run, default_timeout=30, default_concurrency=1),
    StageSpec(Stage.STORE, store.run, default_timeout=120, default_concurrency=1),
    StageSpec(
        Stage.EXTRACT,
        extract.run,
        default_timeout=300,
        default_concurrency=2,
        # The extraction's fork server (about 0.7 s to start).
        warm_up=isolation.warm_up,
    ),
    StageSpec(
        Stage.EMBED,
        embed.run,
        default_timeout=600,
        default_concurrency=2,
        provider=embed.PROVIDER,
    ),
    StageSpec(Stage.SETTLE, settle.run, default_timeout=30, default_concurrency=1),
)

# The stages each source goes through, in order. An upload's document is made and its
# bytes stored at accept, so `create` and `store` would only confirm them: uploads start
# at `extract`, which checks the bytes against the size and SHA-256 taken at accept
# before it reads them (as `store` would have).
SOURCE_STAGES: dict[str, tuple[str, ...]] = {
    RunSource.WEB: (Stage.EXTRACT, Stage.EMBED, Stage.SETTLE),
    RunSource.API: (Stage.EXTRACT, Stage.EMBED, Stage.SETTLE),
    RunSource.CONNECTOR: tuple(spec.name for spec in STAGES),
}

_BY_NAME = {spec.name: spec for spec in STAGES}


def stage_spec(name: str) -> StageSpec:
    return _BY_NAME[name]


def first_stage(source: str) -> str:
    """The stage a new run of `source` is due at."""
    return SOURCE_STAGES[source][0]


def next_stage(name: str, *, source: str) -> str | None:
    """The stage after `name` for a run of `source`, or None when `name` is its last."""
    stages = SOURCE_STAGES[source]
    if name not in stages:
        # A run that was due at a stage its source now skips (queued before the
        # change) goes on in the full order.
        stages = tuple(spec.name for spec in STAGES)
    index = stages.index(name)
    return stages[index + 1] if index + 1 < len(stages) else None


# --- Queues: the lanes of each stage and priority ------------------------------

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
    if stage not in _BY_NAME or priority not in PRIORITIES or not number.isdigit():
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
