"""Drive runs through the stages in the test process, and make runs the accept path would refuse."""

import hashlib
import io
import time
import uuid

from django.db import transaction
from django.utils import timezone

from documents.models import Document, Organisation, QuotaReservation
from documents.services.content import document_make_searchable
from documents.services.quota import quota_take
from documents.storage import document_storage_key, storage_delete, storage_put
from pipeline.engine import execute_stage
from pipeline.models import TERMINAL_STATUSES, ImportRun, RunSource
from pipeline.stage_list import first_stage
from retrieval.embedding import get_embedder, pack_vector
from retrieval.vector_index import chunks_write


def drive(run_id, *, max_steps: int = 50) -> ImportRun:
    """Run each due stage in turn, as workers would, until the run ends."""
    for _ in range(max_steps):
        run = ImportRun.objects.get(id=run_id)
        if run.status in TERMINAL_STATUSES:
            return run
        if run.due_at and run.due_at > timezone.now():
            time.sleep((run.due_at - timezone.now()).total_seconds())
        execute_stage(str(run.id), run.stage)
    raise AssertionError(f"run {run_id} did not end in {max_steps} steps")


def stored_bytes_replace(document: Document, data: bytes) -> None:
    """Put `data` at the document's key in place of the bytes accepted, as a change to
    (or damage of) the stored file after accept would."""
    storage_delete(key=document.storage_key)
    storage_put(key=document.storage_key, content=io.BytesIO(data))


@transaction.atomic
def held_reservation(*, organisation_id: int, pages: int) -> QuotaReservation:
    """`pages` held for work of the organisation's, as accept holds them (QuotaExceeded
    if they do not fit)."""
    reservation = QuotaReservation(organisation_id=organisation_id, pages=pages, estimated=False)
    quota_take(reservation=reservation)
    reservation.save(force_insert=True)
    return reservation


def unchecked_run(organisation: Organisation, data: bytes, *, kind: str, pages: int) -> ImportRun:
    """A queued run for bytes that skipped upload validation (as a file changed in
    storage after it was accepted would be); lets tests feed the stages input the
    accept path refuses."""
    document_id = uuid.uuid4()
    key = document_storage_key(
        organisation_id=organisation.id, document_id=document_id, version=1, kind=kind
    )
    storage_put(key=key, content=io.BytesIO(data))
    document = Document.objects.create(
        id=document_id,
        organisation=organisation,
        filename=f"unchecked.{kind}",
        kind=kind,
        size_bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        storage_key=key,
    )
    return ImportRun.objects.create(
        organisation=organisation,
        document=document,
        reservation=held_reservation(organisation_id=organisation.id, pages=pages),
        source=RunSource.API,
        stage=first_stage(RunSource.API),
        due_at=timezone.now(),
    )


def document_with_chunks(
    organisation: Organisation, filename: str, texts: list[str], *, embedder=None, vectors=None
) -> Document:
    """A processed (settled) document whose chunks are `texts`, embedded by `embedder` (the
    configured one by default) or given `vectors`, written by the embed stage's own service
    and made searchable by the settle stage's."""
    document = Document.objects.create(
        organisation=organisation,
        filename=filename,
        kind="pdf",
        size_bytes=1,
        sha256=hashlib.sha256(filename.encode()).hexdigest(),
        storage_key=f"test/{uuid.uuid4()}.pdf",
        page_count=len(texts),
    )
    embedder = embedder or get_embedder()
    chunks_write(
        document=document,
        start=0,
        texts=texts,
        vectors=[pack_vector(v) for v in (vectors or embedder.embed(texts))],
        model=embedder.name,
    )
    document_make_searchable(document=document)
    return document
