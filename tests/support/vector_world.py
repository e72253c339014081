"""An organisation's documents for the vector index's tests, and the chunks beside them
that its searches must never return."""

import hashlib
import uuid

from django.utils import timezone

from documents.models import Document
from documents.services.content import document_chunks_upsert, document_make_searchable
from documents.services.organisations import organisation_create
from retrieval.embedding import get_embedder, pack_vector
from tests.support.vector_embedders import OtherSynonymEmbedder, SynonymEmbedder


def vector_document(organisation, filename, texts, *, embedder=None, vectors=None) -> Document:
    """A settled document whose chunks are `texts`, embedded by `embedder` (the configured
    one by default) or given `vectors`, written by the embed stage's service."""
    embedder = embedder or get_embedder()
    document = Document.objects.create(
        organisation=organisation,
        filename=filename,
        kind="pdf",
        size_bytes=1,
        sha256=hashlib.sha256(filename.encode()).hexdigest(),
        storage_key=f"test/{uuid.uuid4()}.pdf",
    )
    document_chunks_upsert(
        document=document,
        start=0,
        texts=texts,
        vectors=[pack_vector(v) for v in (vectors or embedder.embed(texts))],
        model=embedder.name,
    )
    document_make_searchable(document=document)
    return document


def vector_world(embedder: SynonymEmbedder) -> dict:
    """An organisation whose documents share no word with "car" but one; beside it, chunks
    nearer the query that must never be found: another organisation's, a deleted
    document's, a version not yet searchable, another model's."""
    org = organisation_create(slug="acme", page_limit=1000)
    other = organisation_create(slug="globex", page_limit=1000)
    cars = vector_document(
        org,
        "cars.pdf",
        ["The automobile was parked outside the station", "Opening hours of the museum"],
    )
    bills = vector_document(org, "bills.pdf", ["Please pay the invoice by Friday"])
    leave = vector_document(org, "leave.pdf", ["Staff vacation starts in August"])
    vector_document(other, "theirs.pdf", ["car automobile"] * 3)
    deleted = vector_document(org, "deleted.pdf", ["motorcar"])
    Document.objects.filter(id=deleted.id).update(deleted_at=timezone.now())
    pending = vector_document(org, "pending.pdf", ["Minutes of the meeting"])
    pending.version = 2
    Document.objects.filter(id=pending.id).update(version=2)
    # Version 2's chunks, written by its embed stage; its run has not settled.
    document_chunks_upsert(
        document=pending,
        start=0,
        texts=["vehicle"],
        vectors=[pack_vector(embedder.embed(["vehicle"])[0])],
        model=embedder.name,
    )
    vector_document(org, "other-model.pdf", ["car"], embedder=OtherSynonymEmbedder())
    allowed = {
        (document.filename, index): chunk_id
        for document in (cars, bills, leave, pending)
        for chunk_id, index in document.chunks.filter(version=1).values_list("id", "index")
    }
    return {"org": org, "other": other, "allowed": allowed}
