"""What a stage worker does to a run: claim it, keep it, report, complete or fail the stage."""

import copy
import uuid
from dataclasses import dataclass
from datetime import timedelta
from functools import cache

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from documents.models import Document, QuotaReservation
from documents.services.quota import quota_release
from jobs.errors import LeaseLost
from jobs.models import ImportRun, RunStatus, StageAttempt
from jobs.retry import backoff_seconds, retries_left
from jobs.services.history import Actor, attempt_finish, dispatch_on_commit, run_save

Outcome = StageAttempt.Outcome


@dataclass(frozen=True)
class Claim:
    run: ImportRun
    attempt: StageAttempt
    owner: str

    @property
    def actor(self) -> Actor:
        return Actor.worker(self.attempt.worker)


# The claim as one statement (one round trip, no transaction of its own): the
# conditional UPDATE takes the stage, and in the same statement the attempt is
# inserted, the queued -> processing change written to the history, and the
# run returned with the document and reservation the stage works on. `old` locks
# the row first so that its status is the one the UPDATE changed.
CLAIM_SQL = """
WITH old AS (
    SELECT id, status FROM jobs_importrun WHERE id = %(run_id)s FOR UPDATE
), claimed AS (
    UPDATE jobs_importrun AS run SET
        status = %(processing)s,
        lease_owner = %(owner)s,
        lease_expires_at = %(expires)s,
        stage_attempts = run.stage_attempts + 1,
        total_attempts = run.total_attempts + 1,
        started_at = COALESCE(run.started_at, %(now)s),
        updated_at = %(now)s,
        stage_entered_at = CASE WHEN old.status = %(queued)s
            THEN %(now)s ELSE run.stage_entered_at END
    FROM old
    WHERE run.id = old.id AND run.stage = %(stage)s AND run.lease_owner = ''
        AND run.status IN (%(queued)s, %(processing)s)
        AND (run.due_at IS NULL OR run.due_at <= %(now)s)
    RETURNING run.*, old.status AS from_status
), attempt AS (
    INSERT INTO jobs_stageattempt (run_id, stage, generation, number, job_id, worker,
        started_at, outcome, error_code, error_type, error_message, traceback)
    SELECT id, stage, generation, stage_attempts, %(job_id)s, %(worker)s,
        %(now)s, %(running)s, '', '', '', ''
    FROM claimed
    RETURNING id
), started AS (
    INSERT INTO jobs_runtransition (run_id, from_status, to_status, from_stage, to_stage,
        actor_label, reason, created_at)
    SELECT id, %(queued)s, %(processing)s, stage, stage, %(actor)s, %(reason)s, %(now)s
    FROM claimed WHERE from_status = %(queued)s
)
SELECT {columns}, attempt.id
FROM claimed CROSS JOIN attempt
LEFT JOIN documents_document AS document ON document.id = claimed.document_id
JOIN documents_quotareservation AS reservation ON reservation.id = claimed.reservation_id
"""


def _fields(model) -> list:
    return list(model._meta.concrete_fields)


@cache
def _claim_sql() -> str:
    parts = [(ImportRun, "claimed"), (Document, "document"), (QuotaReservation, "reservation")]
    columns = ", ".join(
        f'{alias}."{field.column}"' for model, alias in parts for field in _fields(model)
    )
    return CLAIM_SQL.format(columns=columns)


def _instance(model, values: list):
    return model.from_db(connection.alias, [f.attname for f in _fields(model)], values)


def run_claim(*, run_id: uuid.UUID, stage: str, job_id: str, worker: str) -> Claim | None:
    """Take a due stage of a run for this worker, or return None if it is not ours to do.

    One conditional UPDATE decides: a duplicate delivery, a late one, a run
    another worker holds, or a run that moved on all change zero rows. The
    attempt record, the history of a queued run starting, and loading the run
    with its document and reservation share its statement.
    """
    now = timezone.now()
    owner = f"{job_id}@{worker}"
    params = {
        "run_id": run_id,
        "stage": stage,
        "owner": owner,
        "expires": now + timedelta(seconds=settings.PAPERLANE_LEASE_SECONDS),
        "now": now,
        "job_id": job_id,
        "worker": worker,
        "queued": RunStatus.QUEUED.value,
        "processing": RunStatus.PROCESSING.value,
        "running": Outcome.RUNNING.value,
        "actor": Actor.worker(worker).label,
        "reason": f"{stage} started",
    }
    with connection.cursor() as cursor:
        cursor.execute(_claim_sql(), params)
        row = cursor.fetchone()
    if row is None:
        return None
    runs, documents = len(_fields(ImportRun)), len(_fields(Document))
    run = _instance(ImportRun, list(row[:runs]))
    if run.document_id is not None:
        run.document = _instance(Document, list(row[runs : runs + documents]))
    run.reservation = _instance(QuotaReservation, list(row[runs + documents : -1]))
    attempt = StageAttempt(
        id=row[-1],
        run=run,
        stage=stage,
        generation=run.generation,
        number=run.stage_attempts,
        job_id=job_id,
        worker=worker,
        started_at=now,
    )
    attempt._state.adding = False
    return Claim(run=run, attempt=attempt, owner=owner)


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


# Completing a stage as one statement: the run moves on (only if this worker still
# holds it), and with it the attempt is closed and the transition written.
COMPLETE_SQL = """
WITH done AS (
    UPDATE jobs_importrun SET {changes}
    WHERE id = %(run_id)s AND lease_owner = %(owner)s
    RETURNING id, status, stage
), attempt AS (
    UPDATE jobs_stageattempt SET outcome = %(succeeded)s, finished_at = %(now)s,
        cpu_ms = %(cpu_ms)s, error_code = '', error_type = '', error_message = '', traceback = ''
    WHERE id = %(attempt_id)s AND EXISTS (SELECT FROM done)
), moved AS (
    INSERT INTO jobs_runtransition (run_id, from_status, to_status, from_stage, to_stage,
        actor_label, reason, created_at)
    SELECT id, %(processing)s, status, %(from_stage)s, stage, %(actor)s, %(reason)s, %(now)s
    FROM done
)
SELECT count(*) FROM done
"""


def run_complete_stage(*, claim: Claim, following: str | None) -> ImportRun:
    """Mark the claimed stage done and `following` due (or the run succeeded when None),
    with its attempt and transition, in one statement: on its own it is atomic, and
    inside the stage's transaction it commits with the stage's result.

    Returns the run as the statement left it; `claim.run` stays the run as claimed.
    LeaseLost if the run is no longer this worker's."""
    run, attempt, now = claim.run, claim.attempt, timezone.now()
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
        changes.update(status=RunStatus.SUCCEEDED.value, finished_at=now, due_at=None)
    else:
        changes.update(stage=following, due_at=now, progress_done=0, progress_total=0)
    from_stage = run.stage
    sql = COMPLETE_SQL.format(changes=", ".join(f"{k} = %(set_{k})s" for k in changes))
    params = {f"set_{k}": v for k, v in changes.items()} | {
        "run_id": run.id,
        "owner": claim.owner,
        "attempt_id": attempt.id,
        "cpu_ms": attempt.cpu_ms,
        "now": now,
        "succeeded": Outcome.SUCCEEDED.value,
        "processing": RunStatus.PROCESSING.value,
        "from_stage": from_stage,
        "actor": claim.actor.label,
        "reason": f"{from_stage} succeeded",
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        if cursor.fetchone()[0] != 1:
            raise LeaseLost(str(run.id))
    finished = copy.copy(run)
    for field, value in changes.items():
        setattr(finished, field, value)
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
