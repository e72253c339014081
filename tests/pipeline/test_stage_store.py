"""The store stage: the stored bytes must be the ones accepted.

Uploads skip it (their bytes are stored at accept and checked by extract,
tests/pipeline/test_stage_extract.py); an upload's run that was due at store before
they did still passes through it, and checks them here. Connectors' runs fetch
their bytes here (tests/jobs/test_connectors_*.py).
"""

import pytest

from documents.storage import storage_delete
from pipeline.models import ImportRun, StageAttempt
from tests.support.files import make_pdf
from tests.support.runs import drive, stored_bytes_replace
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)


def due_at_store(run: ImportRun) -> ImportRun:
    """The run as an upload accepted before uploads skipped store: due there."""
    ImportRun.objects.filter(id=run.id).update(stage="store")
    return ImportRun.objects.select_related("document").get(id=run.id)


def attempts(run: ImportRun) -> list[tuple[str, str]]:
    return list(StageAttempt.objects.filter(run=run).values_list("stage", "outcome"))


@pytest.mark.parametrize("same_size", [False, True], ids=["other_size", "same_size"])
def test_a_changed_stored_file_fails_a_run_still_at_store_with_file_mismatch(api, same_size):
    run = due_at_store(accepted_run(api, make_pdf(2, label="Page")))
    changed = make_pdf(2, label="Edit") if same_size else make_pdf(3)
    assert (len(changed) == run.document.size_bytes) == same_size
    stored_bytes_replace(run.document, changed)

    run = drive(run.id)

    assert (run.status, run.stage, run.error_code) == ("failed", "store", "file_mismatch")
    assert "does not match the upload" in run.error_message
    assert attempts(run) == [("store", "permanent_error")]


def test_a_missing_stored_file_fails_a_run_still_at_store(api):
    run = due_at_store(accepted_run(api, make_pdf(1)))
    storage_delete(key=run.document.storage_key)

    run = drive(run.id)

    assert (run.status, run.stage, run.error_code) == ("failed", "store", "file_missing")
    assert "no longer in storage" in run.error_message
    assert attempts(run) == [("store", "permanent_error")]
