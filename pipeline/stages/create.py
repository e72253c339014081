"""create: the run's document record, with stable ids, made or found by the run's source.

An upload's document is made at accept (its id is in the 202 answer) and its run starts
at `extract`; a run of another source (a connected folder) gets its document here from
that source (pipeline/sources.py).
"""

from pipeline.sources import source_for
from pipeline.stages.context import StageContext


def run(ctx: StageContext) -> None:
    source_for(ctx.run.source).create(ctx)
