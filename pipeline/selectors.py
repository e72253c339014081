"""Reads of runs and of documents with their runs, scoped to one organisation; each run
with what its source needs to say where it came from."""

import uuid

from django.db.models import Exists, OuterRef, QuerySet, Subquery

from core.errors import NotFound
from documents.models import Document, Organisation
from documents.selectors import document_list
from pipeline.models import (
    ACTIVE_STATUSES,
    ImportRun,
    RunStatus,
    RunTransition,
    Stage,
)
from pipeline.sources import sources_run_related


def run_get(*, organisation: Organisation, run_id: uuid.UUID) -> ImportRun:
    try:
        return ImportRun.objects.select_related("document", *sources_run_related()).get(
            organisation=organisation, id=run_id
        )
    except ImportRun.DoesNotExist:
        raise NotFound("Run not found.") from None


# Newest first and, of runs made in the same instant, the greater id first: what every
# read of a document's latest run orders by, so the list's row and its status filter agree.
LATEST_FIRST = ("-created_at", "-id")


def _latest_run() -> QuerySet[ImportRun]:
    """The latest run of the document of the outer query, for a Subquery."""
    return ImportRun.objects.filter(document=OuterRef("pk")).order_by(*LATEST_FIRST)


def documents_with_latest_runs(
    *, documents: list[Document]
) -> list[tuple[Document, ImportRun | None]]:
    """Each document beside its latest run (None if it has none): one run read per
    document, however many it has."""
    latest = (
        Document.objects.filter(id__in=[d.id for d in documents])
        .annotate(run_id=Subquery(_latest_run().values("id")[:1]))
        .values("run_id")
    )
    runs = ImportRun.objects.filter(id__in=latest).select_related(*sources_run_related())
    by_document = {run.document_id: run for run in runs}
    return [(document, by_document.get(document.id)) for document in documents]


def documents_filtered(
    *,
    organisation: Organisation,
    status: str = "",
    kind: str = "",
    source: str = "",
) -> QuerySet[Document]:
    """The organisation's documents, newest first, narrowed to those whose latest run has
    `status`, of `kind` (pdf, docx, png, jpeg, tiff), or that came from `source` (web,
    api, connector); an empty value narrows nothing. Values outside those sets find nothing."""
    documents = document_list(organisation=organisation)
    if status:
        latest_status = Subquery(_latest_run().values("status")[:1])
        documents = documents.annotate(latest_status=latest_status)
        documents = documents.filter(latest_status=status)
    if kind:
        documents = documents.filter(kind=kind)
    if source:
        documents = documents.filter(
            Exists(ImportRun.objects.filter(document=OuterRef("pk"), source=source))
        )
    return documents


def document_runs(*, document: Document, limit: int) -> list[ImportRun]:
    """The document's `limit` newest runs, newest first, each with its attempts (oldest
    first)."""
    return list(
        ImportRun.objects.filter(document=document)
        .select_related("created_by", *sources_run_related())
        .prefetch_related("attempts_log")
        .order_by(*LATEST_FIRST)[:limit]
    )


def document_first_run(*, document: Document) -> ImportRun | None:
    """The run that brought the document in (where it came from)."""
    runs = ImportRun.objects.filter(document=document).select_related(*sources_run_related())
    return runs.order_by("created_at", "id").first()


def document_run_count(*, document: Document) -> int:
    return ImportRun.objects.filter(document=document).count()


def reembed_runs() -> QuerySet[ImportRun]:
    """The runs a re-embed sent back to `embed` (pipeline/services/reembed.py): a run that
    succeeded once and is in the pipeline again, or ended without success since (the only
    way back for a succeeded run is the `reembed` move)."""
    back = RunTransition.objects.filter(
        run=OuterRef("pk"),
        from_status=RunStatus.SUCCEEDED,
        to_status=RunStatus.QUEUED,
        to_stage=Stage.EMBED,
    )
    return ImportRun.objects.filter(Exists(back))


def reembeds_in_progress() -> int:
    """How many documents a re-embed is at now."""
    return reembed_runs().filter(status__in=ACTIVE_STATUSES).count()


def reembeds_failed(*, limit: int) -> list[ImportRun]:
    """The re-embeds whose run ended without success and is still its document's latest
    (a newer run, a retry or new work, supersedes it), newest first, with their documents:
    they wait for a person."""
    newer = ImportRun.objects.filter(
        document_id=OuterRef("document_id"), created_at__gt=OuterRef("created_at")
    )
    return list(
        reembed_runs()
        .filter(status__in=[RunStatus.FAILED, RunStatus.DEAD_LETTER, RunStatus.CANCELLED])
        .exclude(Exists(newer))
        .select_related("document", "organisation")
        .order_by("-finished_at")[:limit]
    )
