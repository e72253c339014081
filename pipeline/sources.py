"""Where a run's file comes from, for the stages that bring it in.

An upload's bytes are stored and its document made at accept, so its run starts at
`extract`. A run of another source (a connected folder) starts at `create`, which
makes or finds its document, then `store`, which fetches its bytes, stores them as the
document's next version and holds their pages. The pipeline knows such a source only
through this interface: the app that provides one registers it from its
`AppConfig.ready()` (connectors/apps.py), so the pipeline never imports it.
"""

from collections.abc import Iterable
from typing import Protocol

from documents.models import Document
from pipeline.errors import PermanentError
from pipeline.stages.context import StageContext


class Source(Protocol):
    # What to load with a run (select_related) to say where it came from.
    run_related: tuple[str, ...]

    def create(self, ctx: StageContext) -> None:
        """The `create` stage: link the run to its document, made now if it is new."""

    def store(self, ctx: StageContext) -> None:
        """The `store` stage: fetch the run's bytes, store them as its document's next
        version and hold their pages."""

    def document_deleted(self, *, document: Document) -> None:
        """`document` is being deleted (in the deletion's transaction): whatever this
        source would bring it back with is to be left alone from now on."""


_SOURCES: dict[str, Source] = {}


def source_register(name: str, source: Source) -> None:
    """Serve the runs whose `source` is `name` with `source` (from an AppConfig.ready())."""
    _SOURCES[name] = source


def source_for(name: str) -> Source:
    """The source of runs named `name`; PermanentError (the run fails) if none is installed."""
    try:
        return _SOURCES[name]
    except KeyError:
        raise PermanentError(
            f"Runs from {name!r} cannot be processed here: no such source is installed.",
            code="source_unavailable",
        ) from None


def sources() -> Iterable[Source]:
    return _SOURCES.values()


def sources_run_related() -> tuple[str, ...]:
    """Every source's `run_related`, for reads of runs that show where each came from."""
    return tuple(path for source in _SOURCES.values() for path in source.run_related)
