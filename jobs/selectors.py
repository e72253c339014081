"""Reads of runs, scoped to one organisation."""

import uuid

from django.db.models import QuerySet

from documents.errors import NotFound
from documents.models import Organisation
from jobs.models import ImportRun


def run_get(*, organisation: Organisation, run_id: uuid.UUID) -> ImportRun:
    try:
        return ImportRun.objects.select_related("document").get(
            organisation=organisation, id=run_id
        )
    except ImportRun.DoesNotExist:
        raise NotFound("Run not found.") from None


def run_list(*, organisation: Organisation) -> QuerySet[ImportRun]:
    return (
        ImportRun.objects.filter(organisation=organisation)
        .select_related("document")
        .order_by("-created_at", "id")
    )


def latest_runs_by_document(*, document_ids: list[uuid.UUID]) -> dict[uuid.UUID, ImportRun]:
    latest: dict[uuid.UUID, ImportRun] = {}
    for run in ImportRun.objects.filter(document_id__in=document_ids).order_by("created_at"):
        latest[run.document_id] = run
    return latest
