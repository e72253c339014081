"""Priority and fairness with real worker processes (`run_workers`, default worker
counts), real Redis and PostgreSQL: one organisation's backfill does not hold up
another's upload, and interactive work does not starve bulk work."""

import threading

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection as db_connection

from pipeline.dispatch import enqueue_current
from pipeline.models import ImportRun, RunPriority, RunStatus, RunTransition
from pipeline.services.accept import document_accept
from tests.support.files import make_pdf
from tests.support.pipeline import running_workers, wait_terminal
from tests.support.runs import unchecked_run
from tests.support.uploads import accepted_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# run_workers with the shipped worker counts (create 1, store 1, extract 2, embed 2, settle 1).
DEFAULT_COUNTS = ""


def accept_many(org, count: int, *, label: str) -> list:
    """`count` one-page PDFs accepted through the accept service, each enqueued on commit."""
    ids = []
    for n in range(count):
        upload = SimpleUploadedFile(
            f"{label}-{n}.pdf", make_pdf(1, label=f"{label} {n}"), content_type="application/pdf"
        )
        ids.append(document_accept(organisation=org, upload=upload, source="api").run.id)
    return ids


def succeeded_at(run_id):
    return RunTransition.objects.get(run_id=run_id, to_status=RunStatus.SUCCEEDED).created_at


def finished_before(run_ids, moment) -> int:
    """How many of the runs had succeeded by `moment` (from their recorded transitions)."""
    return RunTransition.objects.filter(
        run_id__in=run_ids, to_status=RunStatus.SUCCEEDED, created_at__lt=moment
    ).count()


def test_one_organisations_backfill_does_not_hold_up_anothers_upload(api, org, other_api):
    backfill = accept_many(org, 300, label="backfill")
    single = accepted_run(other_api, make_pdf(1))

    with running_workers(concurrency=DEFAULT_COUNTS):
        finished = wait_terminal([single.id], timeout=120)[single.id]
        done = succeeded_at(single.id)

    assert finished.status == "succeeded", finished.error_message
    # At every stage the upload waits for at most the job each worker is on and one
    # more from the backfill's lane (lanes take turns), so it ends among the backfill's
    # first few documents: those the pipeline already held when it was taken, about
    # one per worker (7), plus startup skew. A single FIFO queue per stage would have
    # put it behind all 300 at the first stage.
    ahead = finished_before(backfill, done)
    assert ahead <= 10, f"{ahead} of the backfill's documents finished first"


def test_bulk_work_moves_while_interactive_work_keeps_arriving(api, org, settings):
    backlog = accept_many(org, 120, label="interactive")
    bulk = unchecked_run(org, make_pdf(1), kind="pdf", pages=1)
    ImportRun.objects.filter(id=bulk.id).update(priority=RunPriority.BULK)
    bulk.refresh_from_db()
    assert enqueue_current(bulk)
    arriving, stop = [], threading.Event()

    def keep_uploading():
        # One more interactive upload every 0.2 s while the workers run.
        try:
            while not stop.wait(0.2):
                arriving.extend(accept_many(org, 1, label="arriving"))
        finally:
            db_connection.close()

    uploader = threading.Thread(target=keep_uploading)
    with running_workers(concurrency=DEFAULT_COUNTS):
        uploader.start()
        try:
            # The time bound: it ends within two minutes of starting the workers.
            finished = wait_terminal([bulk.id], timeout=120)[bulk.id]
        finally:
            stop.set()
            uploader.join()
    done = succeeded_at(bulk.id)
    interactive = backlog + arriving

    assert finished.status == "succeeded", finished.error_message
    assert arriving, "no interactive upload arrived while the bulk run was in the pipeline"
    # Every BULK_EVERY-th (4th) pick of a worker looks at bulk work first, so
    # at each of the five stages the bulk job waits for at most about four interactive
    # jobs: some 20 in all, far fewer than the 120 queued ahead of it (measured: 7).
    ahead = finished_before(interactive, done)
    assert ahead <= 40, f"{ahead} interactive documents finished first"
    assert ImportRun.objects.filter(id__in=interactive).exclude(status="succeeded").count() > 60
