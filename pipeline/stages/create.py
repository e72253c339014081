"""create: make sure the run has its document record, with stable ids.

An upload made the document at accept time (its id is in the 202 answer),
so here it is only confirmed; it must belong to the run's organisation.
A connector's run makes (or finds) its file's document here
(`connectors/source.py`).
"""

from connectors.source import connector_create
from pipeline.errors import PermanentError
from pipeline.models import RunSource
from pipeline.stages.context import StageContext


def run(ctx: StageContext) -> None:
    if ctx.run.source == RunSource.CONNECTOR:
        connector_create(ctx)
        return
    document = ctx.document
    if document is None or document.organisation_id != ctx.run.organisation_id:
        raise PermanentError(
            "The document record for this upload is missing.", code="document_missing"
        )
