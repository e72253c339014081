"""The pipeline as data: one line per stage, in order.

Adding a stage is writing its function in `jobs/stages/` and adding one line
here. Queues, the django-rq queue settings and the workers `run_workers`
starts are all derived from this list; timeouts and concurrency are
settings with these defaults.
"""

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from jobs.models import RunSource, Stage
from jobs.stages import create, embed, extract, settle, store
from jobs.stages.context import StageContext


@dataclass(frozen=True)
class StageSpec:
    name: str
    run: Callable[[StageContext], None]
    default_timeout: int
    default_concurrency: int

    @property
    def queue(self) -> str:
        return self.name

    @property
    def timeout(self) -> int:
        return settings.PAPERLANE_STAGE_TIMEOUTS.get(self.name, self.default_timeout)

    @property
    def concurrency(self) -> int:
        return settings.PAPERLANE_STAGE_CONCURRENCY.get(self.name, self.default_concurrency)


STAGES: tuple[StageSpec, ...] = (
    StageSpec(Stage.CREATE, create.run, default_timeout=30, default_concurrency=1),
    StageSpec(Stage.STORE, store.run, default_timeout=120, default_concurrency=1),
    StageSpec(Stage.EXTRACT, extract.run, default_timeout=300, default_concurrency=2),
    StageSpec(Stage.EMBED, embed.run, default_timeout=600, default_concurrency=2),
    StageSpec(Stage.SETTLE, settle.run, default_timeout=30, default_concurrency=1),
)

# The stages each source goes through, in order. An upload's document and bytes are
# made at accept, so `create` would only confirm them: uploads start at `store`.
SOURCE_STAGES: dict[str, tuple[str, ...]] = {
    RunSource.WEB: (Stage.STORE, Stage.EXTRACT, Stage.EMBED, Stage.SETTLE),
    RunSource.API: (Stage.STORE, Stage.EXTRACT, Stage.EMBED, Stage.SETTLE),
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


def rq_queue_settings() -> dict[str, dict]:
    """django-rq's RQ_QUEUES for every stage queue, so its staff pages show them all."""
    return {
        spec.queue: {"URL": settings.REDIS_URL, "DEFAULT_TIMEOUT": spec.timeout} for spec in STAGES
    }
