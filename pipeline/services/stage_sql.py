"""The claim and the completion of a stage as one PostgreSQL statement each.

pipeline/services/workers.py decides what they do and keeps a step-by-step version
of both for other databases (the SQLite demo); here is only how PostgreSQL does
each in one round trip, with data-modifying CTEs: no transaction of its own for
the claim, and one statement fewer than three inside the stage's transaction
for the completion.
"""

import uuid
from dataclasses import dataclass
from datetime import datetime
from functools import cache

from django.db import connection

from documents.models import Document, QuotaReservation
from pipeline.models import ImportRun, RunStatus, StageAttempt
from pipeline.services.transitions import Actor

Outcome = StageAttempt.Outcome


@dataclass(frozen=True)
class ClaimTake:
    """What a claim writes if the stage is due and free."""

    run_id: uuid.UUID
    stage: str
    owner: str
    expires: datetime
    now: datetime
    job_id: str
    worker: str
    actor: Actor

    @property
    def reason(self) -> str:
        return f"{self.stage} started"


@dataclass(frozen=True)
class StageDone:
    """What completing a claimed stage writes if the run is still held by `owner`."""

    run_id: uuid.UUID
    owner: str
    attempt_id: int
    cpu_ms: int | None
    changes: dict
    from_stage: str
    actor: Actor
    now: datetime

    @property
    def reason(self) -> str:
        return f"{self.from_stage} succeeded"


# A stage is due when its time has passed by the claiming host's clock, or when the
# host that last wrote the run had it due then (`due_at` no later than `updated_at`,
# both from that host's clock): a stage handed on now is never "not due" to a worker
# whose clock is behind the writer's. Only a retry's later time is read from the
# claiming host's clock. workers.py's step-by-step claim says the same.
DUE_SQL = "(run.due_at IS NULL OR run.due_at <= run.updated_at OR run.due_at <= %(now)s)"

# The conditional UPDATE takes the stage; in the same statement the attempt is
# inserted, the queued -> processing change written to the history, and the run
# returned with the document and reservation the stage works on. `old` locks the
# row first, so its status is the one the UPDATE changed. Due: see DUE_SQL.
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
        AND {due}
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

# The run moves on (only while this worker holds it); with it the attempt is
# closed and the transition written.
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


def _fields(model) -> list:
    return list(model._meta.concrete_fields)


@cache
def _claim_sql() -> str:
    parts = [(ImportRun, "claimed"), (Document, "document"), (QuotaReservation, "reservation")]
    columns = ", ".join(
        f'{alias}."{field.column}"' for model, alias in parts for field in _fields(model)
    )
    return CLAIM_SQL.format(columns=columns, due=DUE_SQL)


def _instance(model, values: list):
    return model.from_db(connection.alias, [f.attname for f in _fields(model)], values)


def claim_statement(take: ClaimTake) -> tuple[ImportRun, int] | None:
    """Claim in one statement: the run (document and reservation loaded) and the new
    attempt's id, or None when the stage was not due or not free."""
    params = {
        "run_id": take.run_id,
        "stage": take.stage,
        "owner": take.owner,
        "expires": take.expires,
        "now": take.now,
        "job_id": take.job_id,
        "worker": take.worker,
        "queued": RunStatus.QUEUED.value,
        "processing": RunStatus.PROCESSING.value,
        "running": Outcome.RUNNING.value,
        "actor": take.actor.label,
        "reason": take.reason,
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
    return run, row[-1]


def complete_statement(done: StageDone) -> bool:
    """Complete in one statement; False (nothing written) if the run is not held by
    `done.owner` any more."""
    sql = COMPLETE_SQL.format(changes=", ".join(f"{k} = %(set_{k})s" for k in done.changes))
    params = {f"set_{k}": v for k, v in done.changes.items()} | {
        "run_id": done.run_id,
        "owner": done.owner,
        "attempt_id": done.attempt_id,
        "cpu_ms": done.cpu_ms,
        "now": done.now,
        "succeeded": Outcome.SUCCEEDED.value,
        "processing": RunStatus.PROCESSING.value,
        "from_stage": done.from_stage,
        "actor": done.actor.label,
        "reason": done.reason,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0] == 1
