"""The claim's statement writes its rows as the models say (services/stage_sql.py)."""

import pytest

from pipeline.models import RunSource, StageAttempt
from pipeline.services import stage_sql
from pipeline.services.workers import run_claim
from pipeline.stage_list import first_stage
from tests.support.files import make_pdf
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)

FIRST = first_stage(RunSource.API)


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
    # The statement is written once per process, from the models: written again here.
    stage_sql._claim_sql.cache_clear()
    try:
        assert run_claim(run_id=run.id, stage=FIRST, job_id="job-1", worker=f"host.1.{FIRST}")
    finally:
        stage_sql._claim_sql.cache_clear()

    model_columns = {f.column for f in StageAttempt._meta.concrete_fields if not f.primary_key}
    assert set(written) == model_columns
