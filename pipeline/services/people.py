"""What people do to runs: members and integrations, and operators in the admin.

Each action locks the run's row first and decides on what it finds there, so a
double click, two operators or a retry racing a cancel apply one after the other;
a repeat finds the work done and changes nothing. Each returns what it did.
"""

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from core.errors import Conflict
from documents.models import Document
from documents.roles import Ability
from documents.services.quota import quota_rehold
from pipeline.dispatch import delivery_of, job_state, stage_redeliver
from pipeline.models import (
    ACTIVE_STATUSES,
    RETRYABLE_STATUSES,
    ImportRun,
    RunPriority,
    RunStatus,
    StageAttempt,
)
from pipeline.services.admission import (
    admission_check,
    admission_organisation_over,
    admission_organisation_refusal,
)
from pipeline.services.take_back import run_take_back_locked
from pipeline.services.transitions import Actor, attempt_finish, run_move

Outcome = StageAttempt.Outcome
OPERATOR_DEAD_LETTER = "dead_lettered_by_operator"


@dataclass(frozen=True)
class RunChange:
    """What an action did to a run: `changed` False means it was left alone, `note` why."""

    run: ImportRun
    changed: bool
    note: str


def _lock(run: ImportRun) -> ImportRun:
    return ImportRun.objects.select_for_update().select_related("reservation").get(id=run.id)


def _ended(run: ImportRun) -> Conflict:
    return Conflict(f"The run has already ended ({run.get_status_display().lower()}).")


def _stop(run: ImportRun, move: str, *, actor: Actor, reason: str, why: str) -> None:
    """End an active, locked run on someone's request: its worker (if any) loses the
    lease, so whatever it does next is refused, and its pages are given back. The
    attempt of a worker holding a live lease stays running: that worker is still at
    it, and records it as stopped when it stops at its next step. Any other running
    attempt (a lease that expired: its worker stopped answering) is closed as
    abandoned now."""
    held_by = run.lease_owner.partition("@")[0] if _lease_live(run) else None
    changes = {}
    if move == "dead_letter":
        changes["error_code"] = OPERATOR_DEAD_LETTER
        changes["error_message"] = (
            "An operator stopped processing this document; it can be retried."
        )
    run_move(run=run, move=move, actor=actor, reason=reason, changes=changes)
    for attempt in StageAttempt.objects.filter(run=run, outcome=Outcome.RUNNING):
        if attempt.job_id != held_by:
            message = f"its worker had stopped renewing its lease when {why}"
            attempt_finish(attempt, Outcome.ABANDONED, code="worker_lost", message=message)


def _lease_live(run: ImportRun) -> bool:
    return bool(run.lease_owner and run.lease_expires_at and run.lease_expires_at > timezone.now())


@transaction.atomic
def run_cancel(*, run: ImportRun, actor: Actor, reason: str = "cancelled") -> RunChange:
    """Stop a run that has not ended and give its pages back. Ended runs are a 409;
    Forbidden for a viewer."""
    actor.require(organisation_id=run.organisation_id, ability=Ability.CANCEL)
    run = _lock(run)
    if run.status == RunStatus.CANCELLED:
        return RunChange(run, False, "it was already cancelled")
    if run.status not in ACTIVE_STATUSES:
        raise _ended(run)
    _stop(run, "cancel", actor=actor, reason=reason, why="the run was cancelled")
    return RunChange(run, True, f"cancelled; {run.reservation.pages} pages given back")


@transaction.atomic
def run_dead_letter(*, run: ImportRun, actor: Actor, reason: str) -> RunChange:
    """Take a queued or processing run out of the pipeline on purpose, to be looked at
    (and perhaps retried) later: like a cancel, but it stays in the dead letter list.

    A worker finishing the stage at the same moment either committed first (then the
    run moved on and is dead-lettered from there, or it succeeded and this is a 409) or
    finds the lease gone: its completion is a conditional UPDATE on the lease and
    changes nothing.
    """
    run = _lock(run)
    if run.status == RunStatus.DEAD_LETTER:
        return RunChange(run, False, "it is already dead-lettered")
    if run.status not in ACTIVE_STATUSES:
        raise _ended(run)
    why = "an operator dead-lettered the run"
    _stop(run, "dead_letter", actor=actor, reason=reason, why=why)
    return RunChange(run, True, f"dead-lettered; {run.reservation.pages} pages given back")


@transaction.atomic
def run_retry(
    *, run: ImportRun, actor: Actor, reason: str = "retry requested", admit: bool = False
) -> RunChange:
    """Start an ended run again from the stage it stopped in, holding its pages again
    (QuotaExceeded, and nothing changes, if they no longer fit).

    With `admit` (a member or an integration asking), admission control decides for an
    interactive run as for an upload: SystemBusy, and nothing changes, if the pipeline
    or the organisation's bound of runs in flight is full. Operators are not held back.

    Stages are idempotent, so work already done is not repeated in effect and a
    document version is never charged twice. A deleted document's run is a 409
    (`document_deleted`). Forbidden for a viewer.
    """
    actor.require(organisation_id=run.organisation_id, ability=Ability.RETRY)
    admit = admit and run.priority == RunPriority.INTERACTIVE
    if admit:
        admission_check(organisation_id=run.organisation_id)
    run = _lock(run)
    # Read under the run's lock: a deletion locks the document's runs before it marks it.
    if Document.objects.filter(id=run.document_id, deleted_at__isnull=False).exists():
        raise Conflict(
            "The run's document was deleted; it cannot be processed again.", code="document_deleted"
        )
    if run.status in ACTIVE_STATUSES:
        return RunChange(run, False, f"it is already in the pipeline ({run.status})")
    if run.status not in RETRYABLE_STATUSES:
        raise Conflict("Only failed, dead-lettered or cancelled runs can be retried.")
    # Locks the organisation's row (when the pages were given back): the bound's count
    # below sees every run committed before this one, as at accept.
    quota_rehold(reservation=run.reservation)
    run_move(run=run, move="retry", actor=actor, reason=reason)
    if admit and admission_organisation_over(organisation_id=run.organisation_id):
        raise admission_organisation_refusal(organisation_id=run.organisation_id)
    return RunChange(
        run, True, f"queued again at {run.stage}; {run.reservation.pages} pages held again"
    )


@transaction.atomic
def run_requeue(*, run: ImportRun, actor: Actor, reason: str) -> RunChange:
    """Deliver a run's due stage again when its job is lost from Redis.

    Left alone: an ended run (retry it instead), a stage running under a live lease,
    and a job RQ will still run (queued, scheduled, popped by a worker that is about to
    start it, started a moment ago or still a live worker's current job). A stage
    whose worker's lease expired is taken back first, as the sweeper would. The
    decision and the redelivery are made under the row lock, so two requeues apply one
    after the other, and the history says what the redelivery did; the job keeps its
    deterministic id, so the sweeper doing the same is a duplicate RQ refuses.
    """
    run = _lock(run)
    if run.status not in ACTIVE_STATUSES:
        return RunChange(run, False, f"it has ended ({run.status}); retry it instead")
    if _lease_live(run):
        worker = run.lease_owner.partition("@")[2] or "a worker"
        until = timezone.localtime(run.lease_expires_at).strftime("%H:%M:%S")
        return RunChange(
            run, False, f"its {run.stage} stage is running on {worker} (lease live until {until})"
        )
    if run.lease_owner:
        run_take_back_locked(run=run, actor=actor, note=f"; requeued by an operator: {reason}")
        if run.status == RunStatus.DEAD_LETTER:
            return RunChange(
                run, True, "its worker's lease had expired again: dead-lettered as poison"
            )
        return RunChange(
            run, True, f"its worker's lease had expired: {run.stage} taken back and requeued"
        )
    state = job_state(run)
    if state.waiting:
        return RunChange(run, False, f"its job is {state.describe()}")
    # Delivered under the run's lock: a second requeue waits for this one, then finds
    # the job it enqueued waiting (or being taken by a worker) and leaves it alone.
    redelivery = stage_redeliver(delivery=delivery_of(run))
    if not redelivery:
        return RunChange(run, False, redelivery.note)
    run_move(
        run=run,
        move="requeue",
        actor=actor,
        reason=f"requeued {run.stage}: its job was {state.describe()}; {redelivery.note}: {reason}",
        deliver=False,
    )
    return RunChange(
        run, True, f"{run.stage} requeued: its job was {state.describe()}; {redelivery.note}"
    )
