"""What a stage worker does to a run: claim it, keep it, report, complete or fail the stage."""

import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from documents.services.quota import quota_release
from jobs.errors import LeaseLost
from jobs.models import ImportRun, RunStatus, StageAttempt
from jobs.retry import backoff_seconds, retries_left
from jobs.services.history import Actor, attempt_finish, dispatch_on_commit, run_record, run_save

Outcome = StageAttempt.Outcome


@dataclass(frozen=True)
class Claim:
    run: ImportRun
    attempt: StageAttempt
    owner: str

    @property
    def actor(self) -> Actor:
        return Actor.worker(self.attempt.worker)


@transaction.atomic
def run_claim(
    *, run_id: uuid.UUID, stage: str, job_id: str, worker: str, queued_first: bool = False
) -> Claim | None:
    """Take a due stage of a run for this worker, or return None if it is not ours to do.

    One conditional UPDATE decides: a duplicate delivery, a late one, a run
    another worker holds, or a run that moved on all change zero rows.
    `queued_first` tries a still-queued run first (the first stage), saving
    a statement on the likely path.
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
        "stage_attempts": F("stage_attempts") + 1,
        "total_attempts": F("total_attempts") + 1,
        "started_at": Coalesce("started_at", Value(now)),
        "updated_at": now,
    }
    # Two guarded tries instead of one so that the queued -> processing change,
    # and only it, is written to the history.
    order = [RunStatus.PROCESSING, RunStatus.QUEUED]
    if queued_first:
        order.reverse()
    # Only queued -> processing changes the status: only it restarts the stage clock.
    entered = {RunStatus.QUEUED: {"stage_entered_at": now}, RunStatus.PROCESSING: {}}
    claimed_from = next(
        (s for s in order if due.filter(status=s).update(**take, **entered[s]) == 1), None
    )
    if claimed_from is None:
        return None
    run = ImportRun.objects.select_related("document", "organisation", "reservation").get(id=run_id)
    attempt = StageAttempt.objects.create(
        run=run,
        stage=stage,
        generation=run.generation,
        number=run.stage_attempts,
        job_id=job_id,
        worker=worker,
        started_at=now,
    )
    claim = Claim(run=run, attempt=attempt, owner=owner)
    if claimed_from == RunStatus.QUEUED:
        run_record(
            run,
            from_status=RunStatus.QUEUED,
            from_stage=stage,
            actor=claim.actor,
            reason=f"{stage} started",
        )
    return claim


def run_renew_lease(*, run_id: uuid.UUID, owner: str) -> bool:
    """Extend the hold on a run; False means the hold was lost."""
    expires = timezone.now() + timedelta(seconds=settings.PAPERLANE_LEASE_SECONDS)
    return (
        ImportRun.objects.filter(id=run_id, lease_owner=owner).update(lease_expires_at=expires) == 1
    )


def run_set_progress(*, claim: Claim, done: int, total: int) -> None:
    """Report `done` of `total` steps of the claimed stage; LeaseLost if it is not ours now."""
    if not ImportRun.objects.filter(id=claim.run.id, lease_owner=claim.owner).update(
        progress_done=min(done, total), progress_total=total, updated_at=timezone.now()
    ):
        raise LeaseLost(str(claim.run.id))


def run_lock_claimed(*, claim: Claim) -> bool:
    """Lock the claimed run's row for the rest of the transaction; False if it is not ours."""
    locked = ImportRun.objects.select_for_update().filter(id=claim.run.id, lease_owner=claim.owner)
    return bool(list(locked.values_list("id", flat=True)))


def run_complete_stage(*, claim: Claim, following: str | None) -> ImportRun:
    """Mark the claimed stage done and `following` due (or the run succeeded when None).
    Call inside the stage's transaction."""
    run, now = claim.run, timezone.now()
    changes = {
        "lease_owner": "",
        "lease_expires_at": None,
        "stage_attempts": 0,
        "crashes": 0,
        "error_code": "",
        "error_message": "",
        "updated_at": now,
        # The stage (or, at the end, the status) changes.
        "stage_entered_at": now,
    }
    if following is None:
        changes.update(status=RunStatus.SUCCEEDED, finished_at=now, due_at=None)
    else:
        changes.update(stage=following, due_at=now, progress_done=0, progress_total=0)
    if not ImportRun.objects.filter(id=run.id, lease_owner=claim.owner).update(**changes):
        raise LeaseLost(str(run.id))
    attempt_finish(claim.attempt, Outcome.SUCCEEDED)
    from_stage = run.stage
    for field, value in changes.items():
        setattr(run, field, value)
    run_record(
        run,
        from_status=RunStatus.PROCESSING,
        from_stage=from_stage,
        actor=claim.actor,
        reason=f"{from_stage} succeeded",
    )
    return run


@dataclass(frozen=True)
class Failure:
    """What went wrong in an attempt, for operators: never shown to the uploader."""

    detail: str
    error_type: str = ""
    traceback: str = ""


def _timed_out_before(claim: Claim) -> bool:
    return (
        StageAttempt.objects.filter(
            run_id=claim.run.id,
            generation=claim.attempt.generation,
            stage=claim.attempt.stage,
            outcome=Outcome.TIMEOUT,
        )
        .exclude(id=claim.attempt.id)
        .exists()
    )


@transaction.atomic
def run_record_failure(
    *, claim: Claim, outcome: str, code: str, message: str, failure: Failure, permanent: bool
) -> ImportRun | None:
    """Record a failed attempt and decide: retry later, fail, or dead letter.

    `message` is for the uploader; `failure` is kept on the attempt. A stage
    that times out a second time fails: it would most likely time out again.
    Returns None when the run was no longer this worker's to change.
    """
    run = (
        ImportRun.objects.select_for_update()
        .select_related("reservation")
        .filter(id=claim.run.id, lease_owner=claim.owner)
        .first()
    )
    if run is None:
        return None
    claim.attempt.error_type = failure.error_type
    attempt_finish(claim.attempt, outcome, code=code, message=failure.detail, tb=failure.traceback)
    if outcome == Outcome.TIMEOUT and _timed_out_before(claim):
        permanent, message = True, f"Processing took too long: {message[0].lower()}{message[1:]}"
    now, from_status = timezone.now(), run.status
    run.lease_owner, run.lease_expires_at = "", None
    run.error_code, run.error_message = code, message
    run.crashes = 0  # the worker lived to record this: the crash streak ends
    if permanent:
        run.status, run.finished_at, run.due_at = RunStatus.FAILED, now, None
        reason = f"{run.stage} failed: {failure.detail}"
    elif retries_left(attempt=run.stage_attempts):
        delay = backoff_seconds(attempt=run.stage_attempts)
        run.due_at = now + timedelta(seconds=delay)
        reason = (
            f"{run.stage} attempt {run.stage_attempts} failed ({failure.detail}); "
            f"retry in {delay:.1f}s"
        )
    else:
        run.status, run.finished_at, run.due_at = RunStatus.DEAD_LETTER, now, None
        run.error_message = (
            f"The {run.stage} step failed {run.stage_attempts} times in a row; "
            "an operator can look into it and retry."
        )
        reason = f"{run.stage} failed {run.stage_attempts} times; last error: {failure.detail}"
    fields = ["lease_owner", "lease_expires_at", "error_code", "error_message", "status", "crashes"]
    run_save(
        run,
        [*fields, "finished_at", "due_at"],
        from_status=from_status,
        actor=claim.actor,
        reason=reason,
    )
    if run.status in (RunStatus.FAILED, RunStatus.DEAD_LETTER):
        quota_release(reservation=run.reservation)
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
    attempt_finish(claim.attempt, Outcome.ABANDONED, code="worker_stopped", message=reason)
    dispatch_on_commit(run)
    return True
