"""Reads of documents with their latest runs: which run is the latest, and how much is read
to find it."""

import uuid
from contextlib import contextmanager

import pytest
from django.db.models.signals import post_init
from django.utils import timezone

from documents.models import QuotaReservation
from pipeline.models import ImportRun
from pipeline.selectors import documents_filtered, documents_with_latest_runs
from tests.support.files import make_pdf
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db


def _run(first: ImportRun, run_id: uuid.UUID, **fields) -> ImportRun:
    """Another run of `first`'s document, as a connected file's next version makes one."""
    reservation = QuotaReservation.objects.create(
        organisation=first.organisation, pages=0, status="released"
    )
    return ImportRun.objects.create(
        id=run_id,
        organisation=first.organisation,
        document=first.document,
        reservation=reservation,
        source="connector",
        **fields,
    )


def test_of_runs_made_in_the_same_instant_the_row_and_the_status_filter_take_the_same(api, org):
    first = accepted_run(api, make_pdf(1), "twice.pdf")
    # Written in the opposite order to their ids, so neither the table's order nor the
    # time alone decides.
    high = _run(first, uuid.UUID(int=2**128 - 1), status="failed")
    low = _run(first, uuid.UUID(int=1), status="cancelled")
    same = timezone.now()
    ImportRun.objects.filter(id__in=[high.id, low.id]).update(created_at=same)

    [(_, latest)] = documents_with_latest_runs(documents=[first.document])
    found = {
        status: list(documents_filtered(organisation=org, status=status))
        for status in ("failed", "cancelled", "queued")
    }

    assert latest.id == high.id
    assert found == {"failed": [first.document], "cancelled": [], "queued": []}


@contextmanager
def _runs_read():
    """How many runs are read from the database meanwhile."""
    read = []

    def count(sender, instance, **kwargs):
        read.append(instance.id)

    post_init.connect(count, sender=ImportRun)
    try:
        yield read
    finally:
        post_init.disconnect(count, sender=ImportRun)


def test_the_latest_runs_are_read_one_per_document_however_many_each_has(api, org):
    firsts = [accepted_run(api, make_pdf(1), f"often-{n}.pdf") for n in range(3)]
    for first in firsts:
        for _ in range(10):
            _run(first, uuid.uuid4(), status="cancelled")
    newest = {first.document_id: _run(first, uuid.uuid4(), status="failed") for first in firsts}

    with _runs_read() as read:
        rows = documents_with_latest_runs(documents=[first.document for first in firsts])

    assert len(read) == 3
    assert {document.id: run.id for document, run in rows} == {
        document_id: run.id for document_id, run in newest.items()
    }
