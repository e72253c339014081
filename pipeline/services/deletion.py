"""Deleting a document: its runs stop, its content goes, its record stays for the books.

A worker may be in the middle of a stage of the document's run. Everything a stage
writes commits only while its worker holds the run (the completion, and each embed
batch through its checkpoint, are conditional on the lease), and the deletion cancels
the run under the run's row lock before it removes the content, in one transaction:
a worker that wrote first has its rows removed with the rest; one that writes after
finds its hold gone and writes nothing, charges nothing.
"""

from dataclasses import dataclass

from django.db import OperationalError, transaction

from core.errors import NotFound
from documents.models import Document, QuotaReservation
from documents.roles import Ability
from documents.services.quota import quota_release
from documents.services.removal import document_files_remove, document_mark_deleted
from pipeline.events import document_deleted
from pipeline.models import ACTIVE_STATUSES, ImportRun
from pipeline.services.people import run_cancel
from pipeline.services.transitions import Actor
from pipeline.sources import sources

Held = QuotaReservation.Status
# PostgreSQL's "deadlock detected", and how many times a deletion it ended is tried.
DEADLOCK = "40P01"
DEADLOCK_TRIES = 3


@dataclass(frozen=True)
class Deletion:
    """What deleting a document did: the runs it stopped and the held pages it gave back."""

    document: Document
    runs_cancelled: int
    pages_released: int


def document_delete(*, document: Document, actor: Actor) -> Deletion:
    """Delete a document for a person or an integration (`actor`, recorded on it).

    Its runs still in the pipeline are cancelled through `run_cancel` (the history says
    who and why) and the pages they held are given back; pages already charged stay
    charged: they were processed. Its text and chunks go in the same transaction, its
    stored files (every version) once it has committed. The row stays, marked deleted,
    for the runs, their history and the usage ledger. NotFound if it is deleted already;
    Forbidden unless the actor is an admin of the organisation.
    """
    actor.require(organisation_id=document.organisation_id, ability=Ability.DELETE)
    for _ in range(DEADLOCK_TRIES - 1):
        try:
            return _delete(document=document, actor=actor)
        except OperationalError as exc:
            # A connector's store making a new version cancels the document's older runs
            # while it holds its own: it can take their locks in the other order.
            # PostgreSQL ends one of the two; everything here rolled back, so again.
            if getattr(exc.__cause__, "sqlstate", None) != DEADLOCK:
                raise
    return _delete(document=document, actor=actor)


def _delete(*, document: Document, actor: Actor) -> Deletion:
    with transaction.atomic():
        # Every run of the document before the document itself: the order a stage
        # completing takes (its run, then the document's rows), so neither waits on the
        # other in a circle. A retry racing this waits on its run's lock, then finds the
        # document deleted.
        runs = list(
            ImportRun.objects.select_for_update(of=("self",))
            .select_related("reservation")
            .filter(document_id=document.id)
            .order_by("id")
        )
        document = Document.objects.select_for_update(no_key=True).get(id=document.id)
        if document.deleted_at is not None:
            raise NotFound("Document not found.")
        cancelled = released = 0
        for run in runs:
            held = run.reservation.pages if run.reservation.status == Held.HELD else 0
            if run.status in ACTIVE_STATUSES:
                run_cancel(run=run, actor=actor, reason="its document was deleted")
                cancelled += 1
            elif held:
                # An ended run whose pages were not given back yet (its worker died): now
                # rather than at the sweeper's next pass.
                quota_release(reservation=run.reservation)
            released += held
        document_mark_deleted(document=document, deleted_by=actor.label)
        for source in sources():
            source.document_deleted(document=document)
        document_deleted(document)
        transaction.on_commit(lambda: document_files_remove(document=document))
    return Deletion(document=document, runs_cancelled=cancelled, pages_released=released)
