"""Run state changes.

Every change of a run's status or stage goes through one of these functions.
Each is one transaction that guards the change with a conditional UPDATE,
writes a RunTransition row (old, new, who, why) and, where work becomes due,
enqueues it after commit.
"""

import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from documents.errors import Conflict
from documents.services.quota import quota_rehold, quota_release
from jobs.dispatch import delivery_of, stage_enqueue
from jobs.errors import LeaseLost
from jobs.models import (
    ACTIVE_STATUSES,
    ImportRun,
    RunStatus,
    RunTransition,
    StageAttempt,
)
from jobs.pipeline import STAGES, next_stage

Outcome = StageAttempt.Outcome


def _dispatch_on_commit(run: ImportRun) -> None:
    """Enqueue the stage this transaction made due, once it has committed."""
    delivery = delivery_of(run)
    transaction.on_commit(lambda: stage_enqueue(**delivery))


def _record(
    run: ImportRun,
    *,
    from_status: str,
    from_stage: str,
    actor_label: str,
    reason: str,
    actor: AbstractBaseUser | None = None,
) -> None:
    RunTransition.objects.create(
        run=run,
        from_status=from_status,
        to_status=run.status,
        from_stage=from_stage,
        to_stage=run.stage,
        actor=actor,
        actor_label=actor_label,
        reason=reason[:2000],
    )


def _save_transition(
    run: ImportRun,
    fields: list[str],
    *,
    from_status: str,
    actor_label: str,
    reason: str,
    actor: AbstractBaseUser | None = None,
) -> None:
    """Save the changed fields of a run and write the transition they make."""
    run.save(update_fields=[*fields, "updated_at"])
    _record(
        run,
        from_status=from_status,
        from_stage=run.stage,
        actor=actor,
        actor_label=actor_label,
        reason=reason,
    )


def run_record_created(*, run: ImportRun, actor: AbstractBaseUser | None, actor_label: str) -> None:
    """Record a new run's first transition and enqueue its first stage after commit."""
    _record(
        run, from_status="", from_stage="", actor=actor, actor_label=actor_label, reason="accepted"
    )
    _dispatch_on_commit(run)


# --- Worker side ---------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    run: ImportRun
    attempt: StageAttempt
    owner: str


@transaction.atomic
def run_claim(*, run_id: uuid.UUID, stage: str, job_id: str, worker: str) -> Claim | None:
    """Take a due stage of a run for this worker, or return None if it is not ours to do.

    One conditional UPDATE decides: a duplicate delivery, a late one, a run
    another worker holds, or a run that moved on all change zero rows.
    """
    now = timezone.now()
    owner = f"{job_id}@{worker}"
    due = ImportRun.objects.filter(
        Q(due_at__isnull=True) | Q(due_at__lte=now), id=run_id, stage=stage, lease_owner=""
    )
    take = {
        "status": RunStatus.PROCESSING,
        "lease_owner": owner,
        "lease_expires_at": now + timedelta(seconds=settings.PAPERLANE_LEASE_SECONDS),
        "attempts": F("attempts") + 1,
        "started_at": Coalesce("started_at", Value(now)),
        "updated_at": now,
    }
    # Two guarded tries instead of one so that the queued -> processing change,
    # and only it, is written to the history. The likely one goes first.
    order = [RunStatus.PROCESSING, RunStatus.QUEUED]
    if stage == STAGES[0].name:
        order.reverse()
    claimed_from = next((s for s in order if due.filter(status=s).update(**take) == 1), None)
    if claimed_from is None:
        return None
    from_queued = claimed_from == RunStatus.QUEUED
    run = ImportRun.objects.select_related("document", "organisation").get(id=run_id)
    attempt = StageAttempt.objects.create(
        run=run,
        stage=stage,
        generation=run.generation,
        number=run.attempts,
        job_id=job_id,
        worker=worker,
        started_at=now,
    )
    if from_queued:
        _record(
            run,
            from_status=RunStatus.QUEUED,
            from_stage=stage,
            actor_label=f"worker:{worker}",
            reason=f"{stage} started",
        )
    return Claim(run=run, attempt=attempt, owner=owner)


def run_renew_lease(*, run_id: uuid.UUID, owner: str) -> bool:
    """Extend the hold on a run; False means the hold was lost."""
    expires = timezone.now() + timedelta(seconds=settings.PAPERLANE_LEASE_SECONDS)
    return (
        ImportRun.objects.filter(id=run_id, lease_owner=owner).update(lease_expires_at=expires) == 1
    )


def run_set_progress(*, run_id: uuid.UUID, owner: str, done: int, total: int) -> None:
    if not ImportRun.objects.filter(id=run_id, lease_owner=owner).update(
        progress_done=min(done, total), progress_total=total, updated_at=timezone.now()
    ):
        raise LeaseLost(str(run_id))


def _finish_attempt(
    attempt: StageAttempt, outcome: str, *, message: str = "", tb: str = ""
) -> None:
    attempt.outcome = outcome
    attempt.finished_at = timezone.now()
    attempt.error_message = message[:10000]
    attempt.traceback = tb[:50000]
    attempt.save(update_fields=["outcome", "finished_at", "error_message", "traceback", "cpu_ms"])


def lock_claimed_run(*, claim: Claim) -> bool:
    """Lock the claimed run's row for the rest of the transaction; False if it is not ours."""
    locked = ImportRun.objects.select_for_update().filter(id=claim.run.id, lease_owner=claim.owner)
    return bool(list(locked.values_list("id", flat=True)))


def run_complete_stage(*, claim: Claim) -> ImportRun:
    """Mark the claimed stage done and the next one due. Call inside the stage's transaction."""
    run, now = claim.run, timezone.now()
    following = next_stage(run.stage)
    changes = {
        "lease_owner": "",
        "lease_expires_at": None,
        "attempts": 0,
        "crashes": 0,
        "error_code": "",
        "error_message": "",
        "updated_at": now,
    }
    if following is None:
        changes.update(status=RunStatus.SUCCEEDED, finished_at=now, due_at=None)
    else:
        changes.update(stage=following, due_at=now, progress_done=0, progress_total=0)
    if not ImportRun.objects.filter(id=run.id, lease_owner=claim.owner).update(**changes):
        raise LeaseLost(str(run.id))
    _finish_attempt(claim.attempt, Outcome.SUCCEEDED)
    from_stage = run.stage
    for field, value in changes.items():
        setattr(run, field, value)
    _record(
        run,
        from_status=RunStatus.PROCESSING,
        from_stage=from_stage,
        actor_label=f"worker:{claim.attempt.worker}",
        reason=f"{from_stage} succeeded",
    )
    return run


@transaction.atomic
def run_record_failure(
    *, claim: Claim, outcome: str, message: str, code: str, tb: str = "", permanent: bool
) -> ImportRun | None:
    """Record a failed attempt and decide: retry later, fail, or dead letter.

    Returns None when the run was no longer this worker's to change.
    """
    from jobs.retry import backoff_seconds, retries_left

    run = (
        ImportRun.objects.select_for_update()
        .filter(id=claim.run.id, lease_owner=claim.owner)
        .first()
    )
    if run is None:
        return None
    _finish_attempt(claim.attempt, outcome, message=message, tb=tb)
    now, from_status = timezone.now(), run.status
    run.lease_owner, run.lease_expires_at = "", None
    run.error_code, run.error_message = code, message
    run.crashes = 0  # the worker lived to record this: the crash streak ends
    if permanent:
        run.status, run.finished_at, run.due_at = RunStatus.FAILED, now, None
        reason = f"{run.stage} failed: {message}"
    elif retries_left(attempt=run.attempts):
        delay = backoff_seconds(attempt=run.attempts)
        run.due_at = now + timedelta(seconds=delay)
        reason = f"{run.stage} attempt {run.attempts} failed ({message}); retry in {delay:.1f}s"
    else:
        run.status, run.finished_at, run.due_at = RunStatus.DEAD_LETTER, now, None
        reason = f"{run.stage} failed {run.attempts} times; last error: {message}"
    fields = ["lease_owner", "lease_expires_at", "error_code", "error_message", "status", "crashes"]
    _save_transition(
        run,
        [*fields, "finished_at", "due_at"],
        from_status=from_status,
        actor_label=f"worker:{claim.attempt.worker}",
        reason=reason,
    )
    if run.status in (RunStatus.FAILED, RunStatus.DEAD_LETTER):
        quota_release(run=run)
    # A retry is delivered by the stage job's on_success callback (or the sweeper).
    return run


@transaction.atomic
def run_release(*, claim: Claim, reason: str) -> bool:
    """Give a claimed stage back at once (a worker stopping); it is due again now."""
    run, now = claim.run, timezone.now()
    if not ImportRun.objects.filter(id=run.id, lease_owner=claim.owner).update(
        lease_owner="", lease_expires_at=None, due_at=now, updated_at=now
    ):
        return False
    run.lease_owner, run.lease_expires_at, run.due_at = "", None, now
    _finish_attempt(claim.attempt, Outcome.ABANDONED, message=reason)
    _dispatch_on_commit(run)
    return True


# --- Sweeper side ----------------------------------------------------------------


@transaction.atomic
def run_abandon_expired(*, run_id: uuid.UUID) -> ImportRun | None:
    """A worker stopped renewing its hold: record the crash, then retry or dead letter."""
    now = timezone.now()
    run = (
        ImportRun.objects.select_for_update(skip_locked=True)
        .filter(id=run_id, lease_expires_at__lt=now)
        .exclude(lease_owner="")
        .first()
    )
    if run is None:
        return None
    owner = run.lease_owner
    job_id, _, worker = owner.partition("@")
    message = f"worker {worker or 'unknown'} stopped responding during {run.stage}"
    for attempt in StageAttempt.objects.filter(
        run=run, stage=run.stage, job_id=job_id, outcome=Outcome.RUNNING
    ):
        _finish_attempt(attempt, Outcome.ABANDONED, message=message)
    run.crashes += 1
    run.lease_owner, run.lease_expires_at = "", None
    from_status = run.status
    if run.crashes >= settings.PAPERLANE_POISON_CRASHES:
        run.status, run.finished_at, run.due_at = RunStatus.DEAD_LETTER, now, None
        run.error_code = "poison"
        run.error_message = (
            f"The {run.stage} stage stopped its worker {run.crashes} times in a row; "
            "an operator needs to look at this document."
        )
        reason = run.error_message
    else:
        run.due_at = now
        run.error_code, run.error_message = "worker_lost", message
        reason = f"{message}; resuming elsewhere"
    fields = ["crashes", "lease_owner", "lease_expires_at", "status", "finished_at", "due_at"]
    _save_transition(
        run,
        [*fields, "error_code", "error_message"],
        from_status=from_status,
        actor_label="sweeper",
        reason=reason,
    )
    if run.status == RunStatus.DEAD_LETTER:
        quota_release(run=run)
    else:
        _dispatch_on_commit(run)
    return run


# --- People ------------------------------------------------------------------------


@transaction.atomic
def run_cancel(*, run: ImportRun, actor: AbstractBaseUser | None, actor_label: str) -> ImportRun:
    """Stop a run that has not ended and give its pages back. Ended runs are a 409."""
    run = ImportRun.objects.select_for_update().get(id=run.id)
    if run.status == RunStatus.CANCELLED:
        return run
    if run.status not in ACTIVE_STATUSES:
        raise Conflict(f"The run has already ended ({run.get_status_display().lower()}).")
    from_status, now = run.status, timezone.now()
    run.status, run.finished_at, run.due_at = RunStatus.CANCELLED, now, None
    run.lease_owner, run.lease_expires_at = "", None
    _save_transition(
        run,
        ["status", "finished_at", "due_at", "lease_owner", "lease_expires_at"],
        from_status=from_status,
        actor=actor,
        actor_label=actor_label,
        reason="cancelled",
    )
    quota_release(run=run)
    for attempt in StageAttempt.objects.filter(run=run, outcome=Outcome.RUNNING):
        _finish_attempt(attempt, Outcome.SKIPPED, message="the run was cancelled")
    return run


RETRYABLE = (RunStatus.FAILED, RunStatus.DEAD_LETTER, RunStatus.CANCELLED)


@transaction.atomic
def run_retry(*, run: ImportRun, actor: AbstractBaseUser | None, actor_label: str) -> ImportRun:
    """Start an ended run again from the stage it stopped in, holding its pages again.

    Stages are idempotent, so work already done is not repeated in effect and a
    document version is never charged twice.
    """
    run = ImportRun.objects.select_for_update().get(id=run.id)
    if run.status in ACTIVE_STATUSES:
        return run
    if run.status not in RETRYABLE:
        raise Conflict("Only failed, dead-lettered or cancelled runs can be retried.")
    quota_rehold(run=run)
    from_status = run.status
    run.status, run.due_at, run.finished_at = RunStatus.QUEUED, timezone.now(), None
    run.attempts = run.crashes = 0
    run.generation += 1
    run.error_code = run.error_message = ""
    fields = ["status", "due_at", "finished_at", "attempts", "crashes", "generation"]
    _save_transition(
        run,
        [*fields, "error_code", "error_message"],
        from_status=from_status,
        actor=actor,
        actor_label=actor_label,
        reason="retry requested",
    )
    _dispatch_on_commit(run)
    return run
