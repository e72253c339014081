"""Re-embedding after the embedding model changed, through the pipeline itself.

Each document whose searchable chunks are not all on the current model has the run that
settled its searchable version sent back to `embed` (the table's `reembed` move), on the
bulk lanes: the embed workers take it after people's uploads, and it pauses with them
while the provider keeps failing. It is then a run like any other, in the admin with its
attempts, history and progress, held by a lease, retried with backoff, resumed after its
worker is killed, dead-lettered for an operator. The embed stage splits the text kept
again (nothing is extracted) and calls the provider only for chunks not yet on the model,
so a re-embed stopped anywhere goes on where it stopped; settle finds the version
charged already and charges nothing. The database is all the state there is.

A document with a run in the pipeline is left alone: that run embeds with the current
model. A re-embed whose run failed waits for a person (its run's retry, or asking again).
"""

from dataclasses import dataclass

from django.db import transaction
from django.db.models import QuerySet

from documents.models import Organisation
from pipeline.models import ACTIVE_STATUSES, ImportRun, RunPriority, RunStatus, Stage
from pipeline.services.transitions import Actor, run_move
from retrieval.coverage import documents_to_reembed
from retrieval.embedding import get_embedder


@dataclass(frozen=True)
class ReembedStarted:
    model: str
    # Documents whose searchable chunks are not all on the model.
    documents: int
    # Runs sent back to `embed` now (a re-embed whose run had failed is retried).
    started: int
    # Documents with a run in the pipeline already (a re-embed under way, or new work).
    in_pipeline: int
    # Documents whose newest run (of a newer version) ended without success: its retry
    # embeds that version with the current model.
    waiting: int
    # Documents left for a next call (`limit`).
    left: int = 0


STARTED, IN_PIPELINE, WAITING = "started", "in_pipeline", "waiting"


def documents_reembed(
    *, actor: Actor, organisation: Organisation | None = None, limit: int | None = None
) -> ReembedStarted:
    """Re-embed every document of `organisation` (or of all) whose searchable chunks are
    not all on the current model: at most `limit` of them (the rest are `left`)."""
    model = get_embedder().name
    found = [document_id for document_id, _ in documents_to_reembed(organisation=organisation)]
    handled = found if limit is None else found[:limit]
    outcomes = [_reembed(document_id, actor=actor, model=model) for document_id in handled]
    return ReembedStarted(
        model=model,
        documents=len(found),
        started=outcomes.count(STARTED),
        in_pipeline=outcomes.count(IN_PIPELINE),
        waiting=outcomes.count(WAITING),
        left=len(found) - len(handled),
    )


@transaction.atomic
def _reembed(document_id, *, actor: Actor, model: str) -> str:
    runs = ImportRun.objects.select_for_update().select_related("reservation", "document")
    latest = runs.filter(document_id=document_id).order_by("-created_at").first()
    if latest is None or latest.status in ACTIVE_STATUSES:
        return IN_PIPELINE
    document = latest.document
    if document.searchable_version != document.version:
        return WAITING
    reason = f"re-embed with {model}"
    if latest.status == RunStatus.SUCCEEDED:
        move, changes = "reembed", {"priority": RunPriority.BULK}
    elif reembed_runs().filter(id=latest.id).exists():
        move, changes = "retry", {}  # an earlier re-embed that ended without success
    else:
        return WAITING
    run_move(run=latest, move=move, actor=actor, reason=reason, changes=changes)
    return STARTED


def reembed_runs() -> QuerySet[ImportRun]:
    """The runs a re-embed sent back to `embed`: a run that succeeded once and is in the
    pipeline again, or ended without success since (the only way back for a succeeded
    run is the `reembed` move)."""
    return ImportRun.objects.filter(
        transitions__from_status=RunStatus.SUCCEEDED,
        transitions__to_status=RunStatus.QUEUED,
        transitions__to_stage=Stage.EMBED,
    ).distinct()


def reembeds_in_progress() -> int:
    """How many documents a re-embed is at now."""
    return reembed_runs().filter(status__in=ACTIVE_STATUSES).count()


def reembeds_failed(*, limit: int) -> list[ImportRun]:
    """The re-embeds whose run ended without success and waits for a person, newest
    first, with their documents."""
    ended = [RunStatus.FAILED, RunStatus.DEAD_LETTER, RunStatus.CANCELLED]
    return list(
        reembed_runs()
        .filter(status__in=ended)
        .select_related("document", "organisation")
        .order_by("-finished_at")[:limit]
    )
