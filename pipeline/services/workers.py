"""What a stage worker does to a run: claim it, keep it, report, complete or fail the stage.

Every change of status or stage is a move of the table in services/transitions.py. The
claim and the completion are one statement each (services/stage_sql.py): the form the
cost benchmark found cheaper than the ORM's steps in a transaction (docs/benchmarks.md).
"""

import copy
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from pipeline.errors import PROVIDER_OUTAGE, LeaseLost
from pipeline.events import run_ended
from pipeline.models import TERMINAL_STATUSES, ImportRun, RunStatus, RunTransition, StageAttempt
from pipeline.retry import backoff_seconds, provider_wait_seconds, retries_left
from pipeline.services.stage_sql import ClaimTake, StageDone, claim_statement, complete_statement
from pipeline.services.transitions import (
    Actor,
    attempt_finish,
    completion_changes,
    run_move,
)

Outcome = StageAttempt.Outcome


@dataclass(frozen=True)
class Claim:
    run: ImportRun
    attempt: StageAttempt
    owner: str

    @property
    def actor(self) -> Actor:
        return Actor.worker(self.attempt.worker)


def run_claim(*, run_id: uuid.UUID, stage: str, job_id: str, worker: str) -> Claim | None:
    """Take a due stage of a run for this worker, or return None if it is not ours to do.

    One conditional UPDATE decides: a duplicate delivery, a late one, a run
    another worker holds, or a run that moved on all change zero rows. With it
    the attempt is recorded, a queued run's start written to the history, and
    the run loaded with its document and reservation, in the same statement.
    """
    now = timezone.now()
    owner = f"{job_id}@{worker}"
    expires = now + timedelta(seconds=settings.PAPERLANE_LEASE_SECONDS)
    take = ClaimTake(
        run_id=run_id,
        stage=stage,
        owner=owner,
        expires=expires,
        now=now,
        job_id=job_id,
        worker=worker,
        actor=Actor.worker(worker),
    )
    taken = claim_statement(take)
    if taken is None:
        return None
    run, attempt_id = taken
    attempt = StageAttempt(
        id=attempt_id,
        run=run,
        stage=stage,
        generation=run.generation,
        number=run.stage_attempts,
        job_id=job_id,
        worker=worker,
        started_at=now,
    )
    attempt._state.adding = False
    return Claim(run=run, attempt=attempt, owner=take.owner)


def run_renew_lease(*, run_id: uuid.UUID, owner: str) -> bool:
    """Extend the hold on a run; False means the hold was lost."""
    expires = timezone.now() + timedelta(seconds=settings.PAPERLANE_LEASE_SECONDS)
    return (
        ImportRun.objects.filter(id=run_id, lease_owner=owner).update(lease_expires_at=expires) == 1
    )


def run_still_held(*, claim: Claim) -> bool:
    """Whether this worker still holds the claimed run (not cancelled, ended or taken
    back): one indexed read, asked before each slow or paid step."""
    return ImportRun.objects.filter(id=claim.run.id, lease_owner=claim.owner).exists()


_ENDED_AS = {
    RunStatus.CANCELLED: "cancelled",
    RunStatus.DEAD_LETTER: "dead-lettered",
    RunStatus.FAILED: "failed",
    RunStatus.SUCCEEDED: "completed",
}


def run_record_lost_hold(*, claim: Claim) -> str | None:
    """A worker found its hold on the run gone and stopped: close its attempt as what
    happened. `stopped` if the run ended meanwhile (cancelled, dead-lettered, its
    document deleted), `lease_lost` if its stage was taken back after the lease expired
    (the sweeper had recorded it abandoned; the worker was alive after all). Returns the
    outcome, or None if the attempt had been closed otherwise."""
    run = ImportRun.objects.filter(id=claim.run.id).only("status", "stage").first()
    if run is not None and run.status in TERMINAL_STATUSES:
        ended = (
            RunTransition.objects.filter(run_id=run.id, to_status=run.status)
            .order_by("-created_at", "-id")
            .first()
        )
        by = f" by {ended.actor_label} ({ended.reason})" if ended else ""
        outcome, code = Outcome.STOPPED, "run_ended"
        message = (
            f"The run was {_ENDED_AS.get(run.status, run.status)}{by} while this attempt "
            "ran; the worker stopped at its next step and saved nothing more."
        )
    else:
        outcome, code = Outcome.LEASE_LOST, "lease_lost"
        message = (
            "The worker kept no hold on the run: its lease expired (the worker did not "
            "renew it in time) and the stage was taken back; the worker stopped at its "
            "next step and saved nothing more."
        )
    closed = StageAttempt.objects.filter(
        id=claim.attempt.id, outcome__in=[Outcome.RUNNING, Outcome.ABANDONED]
    ).update(
        outcome=outcome,
        finished_at=timezone.now(),
        error_code=code,
        error_type="",
        error_message=message,
        traceback="",
        cpu_ms=claim.attempt.cpu_ms,
    )
    return outcome if closed else None


def run_set_progress(*, claim: Claim, done: int, total: int) -> None:
    """Report `done` of `total` steps of the claimed stage; LeaseLost if it is not ours now."""
    if not ImportRun.objects.filter(id=claim.run.id, lease_owner=claim.owner).update(
        progress_done=min(done, total), progress_total=total, updated_at=timezone.now()
    ):
        raise LeaseLost(str(claim.run.id))


def run_complete_stage(*, claim: Claim, skip: frozenset[str] = frozenset()) -> ImportRun:
    """Mark the claimed stage done and the next one of its source due (or the run
    succeeded after its last), with its attempt and transition, in one statement: on
    its own it is atomic, and inside the stage's transaction it commits with the
    stage's result.

    The optional stages in `skip` are passed over. Returns the run as the statement left
    it; `claim.run` stays the run as claimed.
    LeaseLost if the run is no longer this worker's."""
    run, attempt, now = claim.run, claim.attempt, timezone.now()
    _, changes = completion_changes(run, now=now, skip=skip)
    finished = copy.copy(run)
    for field, value in changes.items():
        setattr(finished, field, value)
    done = StageDone(
        run_id=run.id,
        owner=claim.owner,
        attempt_id=attempt.id,
        cpu_ms=attempt.cpu_ms,
        changes=changes,
        from_stage=run.stage,
        actor=claim.actor,
        now=now,
    )
    if finished.status != RunStatus.SUCCEEDED:
        if not complete_statement(done, finished):
            raise LeaseLost(str(run.id))
    else:
        # The run ends: whoever listens (webhooks' outbox) writes in the same transaction.
        with transaction.atomic():
            if not complete_statement(done, finished):
                raise LeaseLost(str(run.id))
            run_ended(finished)
    attempt.outcome, attempt.finished_at = Outcome.SUCCEEDED, now
    return finished


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


def _window_started(run: ImportRun) -> datetime:
    """When the stage's retry window began: when it started, or after its last try that
    failed while the provider was in an outage (the wait is not counted)."""
    if not run.provider_waits:
        return run.stage_entered_at
    waited = (
        StageAttempt.objects.filter(
            run_id=run.id, generation=run.generation, stage=run.stage, error_code=PROVIDER_OUTAGE
        )
        .order_by("-number")
        .values_list("finished_at", flat=True)
        .first()
    )
    return max(run.stage_entered_at, waited or run.stage_entered_at)


@transaction.atomic
def run_record_failure(
    *,
    claim: Claim,
    outcome: str,
    code: str,
    message: str,
    failure: Failure,
    permanent: bool,
    provider_pause: float | None = None,
) -> ImportRun | None:
    """Record a failed attempt and decide: retry later, fail, or dead letter.

    `message` is for the uploader; `failure` is kept on the attempt. A stage
    that times out a second time fails: it would most likely time out again.
    `provider_pause`: the try failed while the stage's provider is in an outage, its
    breaker paused for that many seconds. The attempt is recorded, but counts neither
    against the run's tries nor its retry window; the stage is due again when the pause
    ends (with jitter), however long the outage lasts.
    Returns None when the run was no longer this worker's to change. What is due
    next (the retry) is delivered by the stage job's callback (or the sweeper).
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
    now = timezone.now()
    changes = {
        "lease_owner": "",
        "lease_expires_at": None,
        "error_code": code,
        "error_message": message,
        "crashes": 0,  # the worker lived to record this: the crash streak ends
    }
    if permanent:
        move, reason = "fail", f"{run.stage} failed: {failure.detail}"
    elif provider_pause is not None:
        delay = provider_wait_seconds(pause=provider_pause)
        changes["provider_waits"] = run.provider_waits + 1
        move, changes["due_at"] = "retry_later", now + timedelta(seconds=delay)
        reason = (
            f"{run.stage} attempt {run.stage_attempts} waits for the provider "
            f"({failure.detail}); not counted, retry in {delay:.1f}s"
        )
    else:
        # What counts: the tries and the time but those spent waiting for the provider.
        tries = run.stage_attempts - run.provider_waits
        seconds = (now - _window_started(run)).total_seconds()
        if retries_left(attempt=tries, in_stage_seconds=seconds):
            delay = backoff_seconds(attempt=tries)
            move, changes["due_at"] = "retry_later", now + timedelta(seconds=delay)
            reason = (
                f"{run.stage} attempt {run.stage_attempts} failed ({failure.detail}); "
                f"retry in {delay:.1f}s"
            )
        else:
            move = "dead_letter"
            waits = run.provider_waits
            waited = f" (not counting {waits} while its provider was down)" if waits else ""
            changes["error_message"] = (
                f"The {run.stage} step failed {tries} times in a row{waited}, over "
                f"{seconds:.0f} seconds; an operator can look into it and retry."
            )
            reason = f"{run.stage} failed {tries} times{waited}; last error: {failure.detail}"
    return run_move(
        run=run, move=move, actor=claim.actor, reason=reason, changes=changes, deliver=False
    )


@transaction.atomic
def run_release(*, claim: Claim, reason: str) -> bool:
    """Give a claimed stage back at once (a worker stopping); it is due again now. The
    stage job then raises, and its `on_failure` callback delivers it elsewhere."""
    run, now = claim.run, timezone.now()
    if not ImportRun.objects.filter(id=run.id, lease_owner=claim.owner).update(
        lease_owner="", lease_expires_at=None, due_at=now, updated_at=now
    ):
        return False
    run.lease_owner, run.lease_expires_at, run.due_at = "", None, now
    attempt_finish(claim.attempt, Outcome.ABANDONED, code="worker_stopped", message=reason)
    return True
