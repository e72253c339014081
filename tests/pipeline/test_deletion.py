"""document_delete against a stage at work: whatever a worker does after the deletion
brings no text or chunk back and charges nothing."""

import threading

import pytest
from django.db import OperationalError, connection
from psycopg.errors import DeadlockDetected

from core.errors import Conflict
from core.isolation import run_isolated
from documents.models import Chunk, Document, DocumentText, UsageEntry
from pipeline.engine import execute_stage
from pipeline.models import ImportRun, StageAttempt
from pipeline.services import deletion
from pipeline.services.deletion import document_delete
from pipeline.services.people import run_cancel, run_retry
from pipeline.services.transitions import Actor
from tests.support.embedders import HookedEmbedder
from tests.support.files import make_pdf
from tests.support.locks import wait_for_lock_waiters
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)

PERSON = Actor("user:alice")
# A run's row lock, as PostgreSQL shows the query waiting for it.
LOCKING_THE_RUN = 'SELECT "jobs_importrun"."id"%'


def deleted(run: ImportRun) -> None:
    document_delete(document=Document.objects.get(id=run.document_id), actor=PERSON)


def assert_nothing_left_and_nothing_charged(run: ImportRun, org) -> None:
    assert not DocumentText.objects.filter(document=run.document_id).exists()
    assert not Chunk.objects.filter(document=run.document_id).exists()
    assert not UsageEntry.objects.filter(document=run.document_id).exists()
    run.refresh_from_db()
    assert run.status == "cancelled"
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (0, 0)


def test_a_document_deleted_while_its_text_is_extracted_gets_no_text(api, org, monkeypatch):
    run = accepted_run(api, make_pdf(3))

    def extract_then_delete(*args, **kwargs):
        extracted = run_isolated(*args, **kwargs)
        deleted(run)  # a person deletes it while the child process works
        return extracted

    monkeypatch.setattr("pipeline.stages.extract.run_isolated", extract_then_delete)

    assert execute_stage(str(run.id), "extract")["outcome"] == "lease_lost"

    assert_nothing_left_and_nothing_charged(run, org)
    assert Document.objects.get(id=run.document_id).page_count is None
    attempt = StageAttempt.objects.get(run=run)
    assert attempt.outcome == "stopped" and "its document was deleted" in attempt.error_message


def test_a_document_deleted_between_two_embed_batches_gets_no_chunk(
    api, org, settings, monkeypatch
):
    settings.PAPERLANE_EMBEDDER = "tests.support.embedders.HookedEmbedder"
    settings.PAPERLANE_EMBED_BATCH_SIZE = 1
    run = accepted_run(api, make_pdf(4, words_per_page=300))
    assert execute_stage(str(run.id), "extract")["outcome"] == "succeeded"
    batches = []

    def delete_during_the_third(texts):
        batches.append(texts)
        if len(batches) == 3:  # two batches are written; the worker embeds the third
            deleted(run)

    monkeypatch.setattr(HookedEmbedder, "before_batch", staticmethod(delete_during_the_third))

    assert execute_stage(str(run.id), "embed")["outcome"] == "lease_lost"

    assert len(batches) == 3
    assert_nothing_left_and_nothing_charged(run, org)


def test_a_late_settle_of_a_deleted_document_charges_nothing(api, org):
    run = accepted_run(api, make_pdf(2))
    for stage in ("extract", "embed"):
        assert execute_stage(str(run.id), stage)["outcome"] == "succeeded"
    deleted(run)

    assert execute_stage(str(run.id), "settle")["outcome"] == "skipped"

    assert_nothing_left_and_nothing_charged(run, org)


def test_a_retry_racing_the_deletion_waits_for_it_then_finds_the_document_deleted(
    api, org, monkeypatch
):
    run = accepted_run(api, make_pdf(2))
    run_cancel(run=run, actor=PERSON)
    runs_locked, finish = threading.Event(), threading.Event()
    marked = deletion.document_mark_deleted

    def mark_when_told(**kwargs):
        runs_locked.set()  # the deletion holds the document's runs now
        assert finish.wait(10)
        order.append("deletion goes on")
        marked(**kwargs)

    monkeypatch.setattr(deletion, "document_mark_deleted", mark_when_told)
    outcome, order = {}, []

    def noted(execute, sql, params, many, context):
        if sql.startswith(LOCKING_THE_RUN.rstrip("%")) and "FOR UPDATE" in sql:
            order.append("retry locks the run")
        return execute(sql, params, many, context)

    def retry():
        with connection.execute_wrapper(noted):
            return run_retry(run=run, actor=PERSON)

    def in_thread(name, fn):
        try:
            outcome[name] = fn()
        except Exception as exc:
            outcome[name] = exc
        finally:
            connection.close()  # this thread's own

    deleting = threading.Thread(target=in_thread, args=("delete", lambda: deleted(run)))
    deleting.start()
    assert runs_locked.wait(10)
    retrying = threading.Thread(target=in_thread, args=("retry", retry))
    retrying.start()
    wait_for_lock_waiters(1, like=LOCKING_THE_RUN, timeout=10)  # the retry, on the run's lock
    finish.set()
    deleting.join(10)
    retrying.join(10)

    assert order == ["retry locks the run", "deletion goes on"]  # it came mid-deletion
    assert outcome["delete"] is None
    assert isinstance(outcome["retry"], Conflict) and outcome["retry"].code == "document_deleted"
    assert ImportRun.objects.get(id=run.id).status == "cancelled"
    org.refresh_from_db()
    assert org.pages_reserved == 0


def test_a_deletion_that_postgresql_ended_as_a_deadlock_is_done_again(api, monkeypatch):
    run = accepted_run(api, make_pdf(1))
    done = deletion._delete
    tries = []

    def deadlocked_once(**kwargs):
        tries.append(1)
        if len(tries) == 1:  # as Django raises what psycopg reports
            raise OperationalError("deadlock detected") from DeadlockDetected("deadlock detected")
        return done(**kwargs)

    monkeypatch.setattr(deletion, "_delete", deadlocked_once)

    deleted(run)

    assert len(tries) == 2
    assert Document.objects.get(id=run.document_id).deleted_at is not None
