"""The claim and the completion written two ways, as one PostgreSQL statement each
(services/stage_sql.py) and step by step (services/workers.py, for the SQLite demo),
write the same rows, and the claim's statement writes what the transitions module says."""

import re
from types import SimpleNamespace

import pytest
from django.db import models

from pipeline.models import ImportRun, RunSource, RunTransition, StageAttempt
from pipeline.services import stage_sql, workers
from pipeline.services.transitions import claim_changes
from pipeline.services.workers import run_claim, run_complete_stage
from pipeline.stage_list import first_stage
from tests.support.files import make_pdf
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)

FIRST = first_stage(RunSource.API)
# Set by both ways, each at its own moment: compared as set or not.
TIMES = (models.DateTimeField,)
# Which run, attempt or history row it is; which document, reservation and token.
KEYS = {"id", "run", "document", "reservation", "organisation", "idempotency_key"}


def comparable(obj: models.Model) -> dict:
    values = {}
    for field in obj._meta.concrete_fields:
        if field.name in KEYS:
            continue
        value = getattr(obj, field.attname)
        if isinstance(field, TIMES):
            value = value is not None
        values[field.name] = value
    return values


def rows_of(run: ImportRun) -> tuple[dict, list[dict], list[dict]]:
    run = ImportRun.objects.get(id=run.id)
    attempts = StageAttempt.objects.filter(run=run).order_by("id")
    transitions = RunTransition.objects.filter(run=run).order_by("id")
    return comparable(run), [comparable(a) for a in attempts], [comparable(t) for t in transitions]


def claim_and_complete(run: ImportRun, *, complete: bool) -> None:
    claim = run_claim(run_id=run.id, stage=FIRST, job_id="job-1", worker=f"host.1.{FIRST}")
    assert claim is not None
    if complete:
        claim.attempt.cpu_ms = 12
        run_complete_stage(claim=claim)


@pytest.mark.parametrize("complete", [False, True], ids=["claim", "claim_and_complete"])
def test_both_ways_write_the_same_rows(api, monkeypatch, complete):
    by_statement = accepted_run(api, make_pdf(1))
    by_steps = accepted_run(api, make_pdf(1))

    claim_and_complete(by_statement, complete=complete)
    monkeypatch.setattr(workers, "connection", SimpleNamespace(vendor="sqlite"))
    claim_and_complete(by_steps, complete=complete)

    assert rows_of(by_statement) == rows_of(by_steps)


def test_the_claims_statement_sets_what_the_transitions_module_says():
    update = re.search(r"UPDATE \{runs\} AS run SET(.*?)\n    FROM old", stage_sql.CLAIM_SQL, re.S)
    columns = set(re.findall(r"^\s*(\w+) =", update.group(1), re.M))

    # Only queued -> processing restarts the stage clock: written apart, in both ways.
    assert columns == {*claim_changes(owner="o", expires=None, now=None), "stage_entered_at"}


def test_a_column_added_to_an_attempt_is_written_by_the_claims_statement(api, monkeypatch):
    """The attempt's columns come from the model: one more, with its default, is written
    as `save()` would write it (shown with a field the model lends a default to)."""
    run = accepted_run(api, make_pdf(1))
    written = []
    original = stage_sql.insert_values

    def recording(obj, *, computed=None):
        columns, values, params = original(obj, computed=computed)
        if isinstance(obj, StageAttempt):
            written.extend(column.strip('"') for column in columns)
        return columns, values, params

    monkeypatch.setattr(stage_sql, "insert_values", recording)
    claim_and_complete(run, complete=False)

    model_columns = {f.column for f in StageAttempt._meta.concrete_fields if not f.primary_key}
    assert set(written) == model_columns
