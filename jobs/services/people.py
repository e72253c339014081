"""What people do to runs: members and integrations, and operators in the admin."""

from django.db import transaction
from django.utils import timezone

from core.errors import Conflict
from documents.services.quota import quota_rehold, quota_release
from jobs.models import ACTIVE_STATUSES, ImportRun, RunStatus, StageAttempt
from jobs.services.history import Actor, attempt_finish, dispatch_on_commit, run_save

Outcome = StageAttempt.Outcome
RETRYABLE = (RunStatus.FAILED, RunStatus.DEAD_LETTER, RunStatus.CANCELLED)


def _lock(run: ImportRun) -> ImportRun:
    return ImportRun.objects.select_for_update().select_related("reservation").get(id=run.id)


@transaction.atomic
def run_cancel(*, run: ImportRun, actor: Actor) -> ImportRun:
    """Stop a run that has not ended and give its pages back. Ended runs are a 409."""
    run = _lock(run)
    if run.status == RunStatus.CANCELLED:
        return run
    if run.status not in ACTIVE_STATUSES:
        raise Conflict(f"The run has already ended ({run.get_status_display().lower()}).")
    from_status, now = run.status, timezone.now()
    run.status, run.finished_at, run.due_at = RunStatus.CANCELLED, now, None
    run.lease_owner, run.lease_expires_at = "", None
    run_save(
        run,
        ["status", "finished_at", "due_at", "lease_owner", "lease_expires_at"],
        from_status=from_status,
        actor=actor,
        reason="cancelled",
    )
    quota_release(reservation=run.reservation)
    for attempt in StageAttempt.objects.filter(run=run, outcome=Outcome.RUNNING):
        attempt_finish(attempt, Outcome.SKIPPED, message="the run was cancelled")
    return run


@transaction.atomic
def run_retry(*, run: ImportRun, actor: Actor) -> ImportRun:
    """Start an ended run again from the stage it stopped in, holding its pages again.

    Stages are idempotent, so work already done is not repeated in effect and a
    document version is never charged twice.
    """
    run = _lock(run)
    if run.status in ACTIVE_STATUSES:
        return run
    if run.status not in RETRYABLE:
        raise Conflict("Only failed, dead-lettered or cancelled runs can be retried.")
    quota_rehold(reservation=run.reservation)
    from_status = run.status
    run.status, run.due_at, run.finished_at = RunStatus.QUEUED, timezone.now(), None
    run.stage_attempts = run.crashes = 0
    run.generation += 1
    run.error_code = run.error_message = ""
    fields = ["status", "due_at", "finished_at", "stage_attempts", "crashes", "generation"]
    run_save(
        run,
        [*fields, "error_code", "error_message"],
        from_status=from_status,
        actor=actor,
        reason="retry requested",
    )
    dispatch_on_commit(run)
    return run
