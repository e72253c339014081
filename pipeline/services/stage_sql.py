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

from core.inserts import insert_params, insert_values
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


def _row_sql(prefix: str, model, computed: dict[str, str]) -> tuple[str, str]:
    """A row of `model`'s columns and values for an INSERT ... SELECT: SQL for those in
    `computed`, a parameter named `<prefix><n>` for the n-th of the others, in the order
    `insert_params` gives their values."""
    columns, values, _ = insert_values(model(), computed=computed)
    supplied = iter(range(len(values)))
    named = [f"%({prefix}{next(supplied)})s" if value == "%s" else value for value in values]
    return ", ".join(columns), ", ".join(named)


def _row_params(prefix: str, obj, computed: dict[str, str], params: dict) -> None:
    for position, value in enumerate(insert_params(obj, computed=computed)):
        params[f"{prefix}{position}"] = value


# The created_at of a history row written in a statement is the statement's `now`.
TRANSITION_AT_NOW = {"created_at": "%(now)s"}


# Written once: only the values change from one claim or completion to the next, so each
# connection prepares the statement once (config/settings.py).
@cache
def _claim_sql() -> str:
    attempt_columns, attempt_values = _row_sql("a", StageAttempt, ATTEMPT_FROM_CLAIM)
    transition_columns, transition_values = _row_sql("t", RunTransition, TRANSITION_AT_NOW)
    parts = [(ImportRun, "claimed"), (Document, "document"), (QuotaReservation, "reservation")]
    return CLAIM_SQL.format(
        runs=_table(ImportRun),
        attempts=_table(StageAttempt),
        transitions=_table(RunTransition),
        documents=_table(Document),
        reservations=_table(QuotaReservation),
        claimed_from=", ".join(f"%(from{n})s" for n in range(len(CLAIMED_FROM))),
        due=DUE_SQL,
        attempt_columns=attempt_columns,
        attempt_values=attempt_values,
        transition_columns=transition_columns,
        transition_values=transition_values,
        columns=", ".join(
            f'{alias}."{field.column}"' for model, alias in parts for field in _fields(model)
        ),
    )


@cache
def _complete_sql(changed: tuple[str, ...], closed: tuple[str, ...]) -> str:
    transition_columns, transition_values = _row_sql("t", RunTransition, TRANSITION_AT_NOW)
    return COMPLETE_SQL.format(
        runs=_table(ImportRun),
        attempts=_table(StageAttempt),
        transitions=_table(RunTransition),
        changes=", ".join(f"{name} = %(set_{name})s" for name in changed),
        attempt_changes=", ".join(f"{name} = %(attempt_{name})s" for name in closed),
        transition_columns=transition_columns,
        transition_values=transition_values,
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
    for position, status in enumerate(sorted(CLAIMED_FROM)):
        params[f"from{position}"] = status
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
    _row_params("a", attempt, ATTEMPT_FROM_CLAIM, params)
    _row_params("t", started, TRANSITION_AT_NOW, params)
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


def complete_statement(done: StageDone, finished: ImportRun) -> bool:
    """Complete in one statement; False (nothing written) if the run is not held by
    `done.owner` any more. `finished` is the run as the statement leaves it."""
    params = {
        "run_id": done.run_id,
        "owner": done.owner,
        "attempt_id": done.attempt_id,
        "now": done.now,
    }
    closed = {**ATTEMPT_SUCCEEDED, "finished_at": done.now, "cpu_ms": done.cpu_ms}
    moved = transition_row(
        finished,
        from_status=RunStatus.PROCESSING,
        from_stage=done.from_stage,
        actor=done.actor,
        reason=done.reason,
    )
    params.update({f"set_{name}": value for name, value in done.changes.items()})
    params.update({f"attempt_{name}": value for name, value in closed.items()})
    _row_params("t", moved, TRANSITION_AT_NOW, params)
    sql = _complete_sql(tuple(done.changes), tuple(closed))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()[0] == 1
