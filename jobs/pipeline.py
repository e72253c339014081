"""The pipeline as data: one line per stage, in order.

Adding a stage is writing its function in `jobs/stages/` and adding one line
here. Queue names, timeouts and concurrency are settings with defaults.
"""

from dataclasses import dataclass

from django.conf import settings

from jobs.models import Stage


@dataclass(frozen=True)
class StageSpec:
    name: str
    # Dotted path of `fn(ctx: StageContext) -> None`; imported when the stage runs.
    function: str
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
    StageSpec(Stage.CREATE, "jobs.stages.create.run", default_timeout=30, default_concurrency=1),
    StageSpec(Stage.STORE, "jobs.stages.store.run", default_timeout=120, default_concurrency=1),
    StageSpec(Stage.EXTRACT, "jobs.stages.extract.run", default_timeout=300, default_concurrency=2),
    StageSpec(Stage.EMBED, "jobs.stages.embed.run", default_timeout=600, default_concurrency=2),
    StageSpec(Stage.SETTLE, "jobs.stages.settle.run", default_timeout=30, default_concurrency=1),
)

_BY_NAME = {spec.name: spec for spec in STAGES}


def stage_spec(name: str) -> StageSpec:
    return _BY_NAME[name]


def next_stage(name: str) -> str | None:
    """The stage after `name`, or None when `name` is the last."""
    names = [spec.name for spec in STAGES]
    position = names.index(name)
    return names[position + 1] if position + 1 < len(names) else None
