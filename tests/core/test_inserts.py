"""Rows of several tables in one statement (core/inserts.py), on PostgreSQL, and saved
one by one on other databases: either way, what save() would have written."""

import uuid

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models.functions import Now
from django.test.utils import CaptureQueriesContext

from core.inserts import rows_insert
from documents.models import Document, QuotaReservation
from pipeline.models import ImportRun, RunTransition

pytestmark = pytest.mark.django_db


def _rows(org, n: int = 1):
    document = Document(
        id=uuid.uuid4(),
        organisation=org,
        filename=f"report-{n}.pdf",
        kind="pdf",
        size_bytes=1234,
        sha256="ab" * 32,
        storage_key=f"org/{org.id}/report-{n}.pdf",
    )
    reservation = QuotaReservation(organisation=org, pages=7, estimated=True)
    run = ImportRun(
        organisation=org, document=document, reservation=reservation, source="api", stage="extract"
    )
    transition = RunTransition(
        run=run, to_status="queued", to_stage="extract", actor_label="test", reason="accepted"
    )
    return reservation, document, run, transition


def _stored(obj) -> dict:
    fresh = type(obj).objects.get(pk=obj.pk)
    return {f.attname: getattr(fresh, f.attname) for f in obj._meta.concrete_fields}


def _held(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields}


def test_the_rows_are_written_in_one_statement_as_save_writes_them(org):
    rows = _rows(org)
    with CaptureQueriesContext(connection) as queries:
        rows_insert(*rows)

    assert len(queries.captured_queries) == 1
    reservation, document, run, transition = rows
    # Defaults (status, counters, the priority) and auto_now fields came from the fields.
    assert reservation.status == "held" and reservation.created_at is not None
    assert run.priority == "interactive" and run.stage_attempts == 0 and run.created_at
    for obj in rows:
        assert not obj._state.adding
        assert _stored(obj) == _held(obj)


def test_a_key_the_database_assigns_is_read_back_by_the_rows_that_point_to_it(org):
    first, second = _rows(org, 1), _rows(org, 2)
    rows_insert(*first)
    rows_insert(*second)

    reservation, _, run, transition = second
    assert reservation.id == first[0].id + 1
    assert ImportRun.objects.get(id=run.id).reservation_id == reservation.id
    assert run.reservation is reservation  # still the instance, not loaded again
    assert RunTransition.objects.get(id=transition.id).run_id == run.id


def test_a_conflict_is_an_integrity_error_and_writes_none_of_the_rows(org):
    # The accept path tells a raced Idempotency-Key by its IntegrityError.
    rows_insert(*_rows(org, 1))
    again = _rows(org, 2)
    again[1].storage_key = f"org/{org.id}/report-1.pdf"  # unique: taken by the first

    with pytest.raises(IntegrityError, match="storage_key"), transaction.atomic():
        rows_insert(*again)

    assert Document.objects.count() == 1 and QuotaReservation.objects.count() == 1


def test_a_key_to_an_unsaved_row_left_out_of_the_call_is_refused_as_save_refuses_it(org):
    reservation, document, run, transition = _rows(org)

    for rows in [(document, run, transition), (document, run, reservation, transition)]:
        with pytest.raises(ValueError, match="ImportRun.reservation points to an unsaved"):
            rows_insert(*rows)

    assert not Document.objects.exists() and not ImportRun.objects.exists()


def test_what_save_would_write_otherwise_is_refused(org):
    reservation, document, run, transition = _rows(org)
    run.due_at = Now()  # an expression: save() would compile it, this writes values only

    with pytest.raises(TypeError, match="plain values only: pipeline.ImportRun.due_at"):
        rows_insert(reservation, document, run, transition)


def test_rows_of_another_shape_get_their_own_statement(org):
    # The statement is written once per shape: the same models, but a run whose
    # reservation is already saved, must not get the one that reads it from an earlier row.
    rows_insert(*_rows(org, 1))
    saved = QuotaReservation.objects.create(organisation=org, pages=2)
    reservation, document, run, transition = _rows(org, 2)
    run.reservation = saved

    rows_insert(reservation, document, run, transition)

    stored = ImportRun.objects.get(id=run.id)
    assert (stored.reservation_id, stored.document_id) == (saved.id, document.id)
    assert RunTransition.objects.get(id=transition.id).run_id == run.id
