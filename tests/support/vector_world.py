"""An organisation's documents for the vector index's tests, and the chunks beside them
that its searches must never return."""

from django.utils import timezone

from documents.models import Document
from documents.services.organisations import organisation_create
from retrieval.embedding import pack_vector
from retrieval.vector_index import chunks_write
from tests.support.runs import document_with_chunks
from tests.support.vector_embedders import OtherSynonymEmbedder, SynonymEmbedder


def vector_world(embedder: SynonymEmbedder) -> dict:
    """An organisation whose documents share no word with "car" but one; beside it, chunks
    nearer the query that must never be found: another organisation's, a deleted
    document's, a version not yet searchable, another model's."""
    org = organisation_create(slug="acme", page_limit=1000)
    other = organisation_create(slug="globex", page_limit=1000)
    cars = document_with_chunks(
        org,
        "cars.pdf",
        ["The automobile was parked outside the station", "Opening hours of the museum"],
    )
    bills = document_with_chunks(org, "bills.pdf", ["Please pay the invoice by Friday"])
    leave = document_with_chunks(org, "leave.pdf", ["Staff vacation starts in August"])
    document_with_chunks(other, "theirs.pdf", ["car automobile"] * 3)
    deleted = document_with_chunks(org, "deleted.pdf", ["motorcar"])
    Document.objects.filter(id=deleted.id).update(deleted_at=timezone.now())
    pending = document_with_chunks(org, "pending.pdf", ["Minutes of the meeting"])
    pending.version = 2
    Document.objects.filter(id=pending.id).update(version=2)
    # Version 2's chunks, written by its embed stage; its run has not settled.
    chunks_write(
        document=pending,
        start=0,
        texts=["vehicle"],
        vectors=[pack_vector(embedder.embed(["vehicle"])[0])],
        model=embedder.name,
    )
    document_with_chunks(org, "other-model.pdf", ["car"], embedder=OtherSynonymEmbedder())
    allowed = {
        (document.filename, index): chunk_id
        for document in (cars, bills, leave, pending)
        for chunk_id, index in document.chunks.filter(version=1).values_list("id", "index")
    }
    return {"org": org, "other": other, "allowed": allowed}
