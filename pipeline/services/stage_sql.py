"""The claim and the completion of a stage as one statement each.

What they write comes from services/transitions.py (the claim's statuses, the
completion's changes, a succeeded attempt's fields, the history row) and the models
(tables, and the columns of the rows inserted, each with the value `save()` would give
it). Each is one round trip, with data-modifying CTEs: no transaction of its own for the
claim, and one statement where the ORM would take three inside the stage's transaction
for the completion.
"""

import uuid
from dataclasses import dataclass
from datetime import datetime
from functools import cache

from django.db import connection

from core.inserts import insert_values
from documents.models import Document, QuotaReservation
from pipeline.models import ImportRun, RunStatus, RunTransition, StageAttempt
from pipeline.services.transitions import (
    ATTEMPT_SUCCEEDED,
    CLAIMED_FROM,
    CLAIMED_TO,
    Actor,
    transition_row,
)


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

# The conditional UPDATE takes the stage (only queued -> processing restarts the stage
# clock); in the same statement the attempt is inserted, the queued -> processing change written
# to the history, and the run returned with the document and reservation the stage
# works on. `old` locks the row first, so its status is the one the UPDATE changed.
CLAIM_SQL = """
WITH old AS (
    SELECT id, status FROM {runs} WHERE id = %(run_id)s FOR UPDATE
), claimed AS (
    UPDATE {runs} AS run SET
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
        AND run.status IN ({claimed_from})
        AND {due}
    RETURNING run.*, old.status AS from_status
), attempt AS (
    INSERT INTO {attempts} ({attempt_columns}) SELECT {attempt_values} FROM claimed
    RETURNING id
), started AS (
    INSERT INTO {transitions} ({transition_columns}) SELECT {transition_values}
    FROM claimed WHERE from_status = %(queued)s
)
SELECT {columns}, attempt.id
FROM claimed CROSS JOIN attempt
LEFT JOIN {documents} AS document ON document.id = claimed.document_id
JOIN {reservations} AS reservation ON reservation.id = claimed.reservation_id
"""

# The run moves on (only while this worker holds it); with it the attempt is
# closed and the transition written.
COMPLETE_SQL = """
WITH done AS (
    UPDATE {runs} SET {changes}
    WHERE id = %(run_id)s AND lease_owner = %(owner)s
    RETURNING id
), attempt AS (
    UPDATE {attempts} SET {attempt_changes}
    WHERE id = %(attempt_id)s AND EXISTS (SELECT FROM done)
), moved AS (
    INSERT INTO {transitions} ({transition_columns}) SELECT {transition_values} FROM done
)
SELECT count(*) FROM done
"""

# The claimed attempt's columns read from the claimed run; the rest are the attempt's
# own values (its defaults included), as `save()` would write them.
ATTEMPT_FROM_CLAIM = {
    "run": "claimed.id",
    "stage": "claimed.stage",
    "generation": "claimed.generation",
    "number": "claimed.stage_attempts",
}


def _fields(model) -> list:
    return list(model._meta.concrete_fields)


def _table(model) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _row(prefix: str, obj, params: dict, computed: dict[str, str]) -> tuple[str, str]:
    """`obj`'s columns and values for an INSERT ... SELECT, its parameters added to
    `params` under names starting with `prefix`."""
    columns, values, row_params = insert_values(obj, computed=computed)
    supplied = iter(row_params)
    named = []
    for position, value in enumerate(values):
        if value == "%s":
            name = f"{prefix}{position}"
            params[name] = next(supplied)
            value = f"%({name})s"
        named.append(value)
    return ", ".join(columns), ", ".join(named)


@cache
def _claim_columns() -> str:
    parts = [(ImportRun, "claimed"), (Document, "document"), (QuotaReservation, "reservation")]
    return ", ".join(
        f'{alias}."{field.column}"' for model, alias in parts for field in _fields(model)
    )


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
        "queued": RunStatus.QUEUED.value,
        "processing": CLAIMED_TO,
    }
    claimed_from = []
    for position, status in enumerate(sorted(CLAIMED_FROM)):
        params[f"from{position}"] = status
        claimed_from.append(f"%(from{position})s")
    attempt = StageAttempt(job_id=take.job_id, worker=take.worker, started_at=take.now)
    # The history row of a queued run's start, written only if the run was queued.
    claimed = ImportRun(id=take.run_id, status=CLAIMED_TO, stage=take.stage)
    started = transition_row(
        claimed,
        from_status=RunStatus.QUEUED,
        from_stage=take.stage,
        actor=take.actor,
        reason=take.reason,
    )
    attempt_columns, attempt_values = _row("a", attempt, params, ATTEMPT_FROM_CLAIM)
    transition_columns, transition_values = _row("t", started, params, {"created_at": "%(now)s"})
    sql = CLAIM_SQL.format(
        runs=_table(ImportRun),
        attempts=_table(StageAttempt),
        transitions=_table(RunTransition),
        documents=_table(Document),
        reservations=_table(QuotaReservation),
        claimed_from=", ".join(claimed_from),
        due=DUE_SQL,
        attempt_columns=attempt_columns,
        attempt_values=attempt_values,
        transition_columns=transition_columns,
        transition_values=transition_values,
        columns=_claim_columns(),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    runs, documents = len(_fields(ImportRun)), len(_fields(Document))
    run = _instance(ImportRun, list(row[:runs]))
    if run.document_id is not None:
        run.document = _instance(Document, list(row[runs : runs + documents]))
    run.reservation = _instance(QuotaReservation, list(row[runs + documents : -1]))
    return run, row[-1]


def _assignments(prefix: str, changes: dict, params: dict) -> str:
    for name, value in changes.items():
        params[f"{prefix}{name}"] = value
    return ", ".join(f"{name} = %({prefix}{name})s" for name in changes)


def complete_statement(done: StageDone, finished: ImportRun) -> bool:
    """Complete in one statement; False (nothing written) if the run is not held by
    `done.owner` any more. `finished` is the run as the statement leaves it."""
    params = {"run_id": done.run_id, "owner": done.owner, "attempt_id": done.attempt_id}
    closed = {**ATTEMPT_SUCCEEDED, "finished_at": done.now, "cpu_ms": done.cpu_ms}
    moved = transition_row(
        finished,
        from_status=RunStatus.PROCESSING,
        from_stage=done.from_stage,
        actor=done.actor,
        reason=done.reason,
    )
    params["now"] = done.now
    transition_columns, transition_values = _row("t", moved, params, {"created_at": "%(now)s"})
    sql = COMPLETE_SQL.format(
        runs=_table(ImportRun),
        attempts=_table(StageAttempt),
        transitions=_table(RunTransition),
        changes=_assignments("set_", done.changes, params),
        attempt_changes=_assignments("attempt_", closed, params),
        transition_columns=transition_columns,
        transition_values=transition_values,
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0] == 1
