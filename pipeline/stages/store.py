"""store: the run's bytes at its document's stable key, fetched by the run's source.

An upload's bytes are stored at accept (and checked against the size and SHA-256 taken
then by `extract`); a run of another source (a connected folder) has them fetched,
stored and their pages held here by that source (pipeline/sources.py).
"""

from pipeline.sources import source_for
from pipeline.stages.context import StageContext


def run(ctx: StageContext) -> None:
    source_for(ctx.run.source).store(ctx)
