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

from documents.models import Organisation
from pipeline.models import ACTIVE_STATUSES, ImportRun, RunPriority, RunStatus
from pipeline.selectors import LATEST_FIRST, reembed_runs
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
    latest = runs.filter(document_id=document_id).order_by(*LATEST_FIRST).first()
    if latest is None:  # chunks with no run (made by hand): nothing to send back
        return WAITING
    if latest.status in ACTIVE_STATUSES:
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
