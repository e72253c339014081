"""Reads of runs and of documents with their runs, scoped to one organisation; each run
with what its source needs to say where it came from."""

import uuid

from core.errors import NotFound
from documents.models import Document, Organisation
from pipeline.models import ImportRun
from pipeline.sources import sources_run_related


def run_get(*, organisation: Organisation, run_id: uuid.UUID) -> ImportRun:
    try:
        return ImportRun.objects.select_related("document", *sources_run_related()).get(
            organisation=organisation, id=run_id
        )
    except ImportRun.DoesNotExist:
        raise NotFound("Run not found.") from None


def latest_runs_by_document(*, document_ids: list[uuid.UUID]) -> dict[uuid.UUID, ImportRun]:
    latest: dict[uuid.UUID, ImportRun] = {}
    runs = ImportRun.objects.filter(document_id__in=document_ids).select_related(
        *sources_run_related()
    )
    for run in runs.order_by("created_at"):
        latest[run.document_id] = run
    return latest


def documents_with_latest_runs(
    *, documents: list[Document]
) -> list[tuple[Document, ImportRun | None]]:
    """Each document beside its latest run (None if it has none)."""
    runs = latest_runs_by_document(document_ids=[d.id for d in documents])
    return [(document, runs.get(document.id)) for document in documents]
