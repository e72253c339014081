"""The pipeline as data: one line per stage, in order.

Adding a stage is writing its function in `pipeline/stages/` and adding one line
here. Queues (`pipeline/queues.py`), the django-rq queue settings and the workers
`run_workers` starts are all derived from this list; timeouts and concurrency are
settings with these defaults.
"""

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from core import isolation
from pipeline.models import RunPriority, RunSource, Stage
from pipeline.stages import create, embed, extract, ocr, settle, store
from pipeline.stages.context import StageContext


@dataclass(frozen=True)
class StageSpec:
    name: str
    run: Callable[[StageContext], None]
    default_timeout: int
    default_concurrency: int
    default_bulk_concurrency: int = 0
    # Run once when a worker of the stage starts, so no document pays for it.
    warm_up: Callable[[], None] | None = None
    # The outside provider the stage calls, by its breaker's name (core/provider_breaker.py): the
    # stage's workers take none of its jobs while that provider keeps failing.
    provider: str | None = None
    # What the stage writes is removed when its run ends without success (embed's chunks,
    # which only a settle makes searchable): a retry of a run that ended after it starts
    # again from it.
    discarded_on_end: bool = False
    # Its jobs are weighed before they run (pipeline/fair_share.py): one organisation's
    # heavy documents take at most all its workers but one.
    weighed: bool = False
    # A run goes through it only when the stage before says so (`StageContext.skip`
    # otherwise): OCR, for documents with pages to read.
    optional: bool = False

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
        weighed=True,
    ),
    StageSpec(
        Stage.OCR,
        ocr.run,
        default_timeout=1800,
        # Two, so that one organisation's long scan (a heavy job: pipeline/fair_share.py
        # lets it hold one at most) never keeps the others' waiting.
        default_concurrency=2,
        warm_up=isolation.warm_up,
        weighed=True,
        optional=True,
    ),
    StageSpec(
        Stage.EMBED,
        embed.run,
        default_timeout=600,
        default_concurrency=2,
        provider=embed.PROVIDER,
        discarded_on_end=True,
    ),
    StageSpec(Stage.SETTLE, settle.run, default_timeout=30, default_concurrency=1),
)

# The stages each source goes through, in order. An upload's document is made and its
# bytes stored at accept, so uploads start at `extract`, which checks the bytes against
# the size and SHA-256 taken at accept before it reads them.
SOURCE_STAGES: dict[str, tuple[str, ...]] = {
    RunSource.WEB: (Stage.EXTRACT, Stage.OCR, Stage.EMBED, Stage.SETTLE),
    RunSource.API: (Stage.EXTRACT, Stage.OCR, Stage.EMBED, Stage.SETTLE),
    RunSource.CONNECTOR: tuple(spec.name for spec in STAGES),
}

_BY_NAME = {spec.name: spec for spec in STAGES}


def stage_spec(name: str) -> StageSpec:
    return _BY_NAME[name]


def first_stage(source: str) -> str:
    """The stage a new run of `source` is due at."""
    return SOURCE_STAGES[source][0]


def next_stage(name: str, *, source: str, skip: frozenset[str] = frozenset()) -> str | None:
    """The stage after `name` for a run of `source`, or None when `name` is its last;
    the optional stages in `skip` are passed over."""
    stages = SOURCE_STAGES[source]
    for following in stages[stages.index(name) + 1 :]:
        if following not in skip:
            return following
        if not _BY_NAME[following].optional:
            raise ValueError(f"{following} is not a stage a run may skip")
    return None


def resume_stage(name: str, *, source: str) -> str:
    """The stage a run of `source` that ended at `name` without success starts again
    from: `name`, or the first stage before it whose output went with the run's end."""
    stages = SOURCE_STAGES[source]
    if name not in stages:
        return name
    for stage in stages[: stages.index(name)]:
        if _BY_NAME[stage].discarded_on_end:
            return stage
    return name
