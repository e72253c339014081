"""One model at a time: which of an organisation's searchable chunks carry the current
embedder's vectors, and re-embedding the others.

Every chunk records the name of the model that made its vector (the name says the
dimensions too); search compares a query only with chunks of the query's model. When
the configured embedder changes, a re-embed gives the chunks of each document's
searchable version vectors of the new model, from the chunk texts already stored: nothing
is extracted or split again. Each batch commits on its own and only chunks not yet on
the model are taken, so a re-embed stopped anywhere (a worker killed, a timeout) goes on
from where it stopped when it is started again, and running it twice costs nothing more.
"""

from typing import NamedTuple

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Q, QuerySet

from core.provider_breaker import breaker
from documents.models import Chunk, Document, Organisation
from documents.vectors_sql import chunk_vectors_write
from retrieval.embedding import PROVIDER, Embedder, get_embedder, pack_vector


class Coverage(NamedTuple):
    model: str  # the current embedder's name
    on_model: int  # searchable chunks whose vectors it made
    total: int  # searchable chunks

    @property
    def complete(self) -> bool:
        return self.on_model == self.total

    @property
    def share(self) -> float:
        """The share of the chunks on the model (1.0 with no chunk at all)."""
        return self.on_model / self.total if self.total else 1.0


def _searchable_chunks() -> QuerySet[Chunk]:
    return Chunk.objects.filter(
        version=F("document__searchable_version"), document__deleted_at__isnull=True
    )


def embedding_coverage(*, organisation: Organisation) -> Coverage:
    """The current model, how many of the organisation's searchable chunks are on it, and
    how many there are: (model, on_model, total)."""
    model = get_embedder().name
    counts = (
        _searchable_chunks()
        .filter(document__organisation=organisation)
        .aggregate(total=Count("id"), on_model=Count("id", filter=Q(embedding_model=model)))
    )
    return Coverage(model, counts["on_model"], counts["total"])


def embedding_coverage_by_organisation(*, limit: int) -> list[tuple[Organisation, Coverage]]:
    """The organisations (at most `limit`, fewest on the model first) some of whose
    searchable chunks are on another model than the current one."""
    model = get_embedder().name
    rows = (
        _searchable_chunks()
        .values("document__organisation")
        .annotate(total=Count("id"), on_model=Count("id", filter=Q(embedding_model=model)))
        .filter(on_model__lt=F("total"))
        .order_by("on_model", "document__organisation")[:limit]
    )
    by_id = {row["document__organisation"]: row for row in rows}
    organisations = Organisation.objects.in_bulk(list(by_id))
    return [
        (organisations[org_id], Coverage(model, row["on_model"], row["total"]))
        for org_id, row in by_id.items()
        if org_id in organisations
    ]


def documents_to_reembed(*, organisation: Organisation | None = None) -> QuerySet:
    """(document id, organisation id) of the documents whose searchable chunks are not
    all on the current model."""
    chunks = _searchable_chunks().exclude(embedding_model=get_embedder().name)
    if organisation is not None:
        chunks = chunks.filter(document__organisation=organisation)
    pairs = chunks.values_list("document_id", "document__organisation_id")
    return pairs.distinct().order_by("document_id")


def _embed(embedder: Embedder, texts: list[str]) -> list[list[float]]:
    provider = breaker(PROVIDER)  # the embed stage's breaker: one provider, one pause
    try:
        vectors = embedder.embed(texts)
    except OSError:  # what a provider that is down or overloaded raises
        provider.failed()
        raise
    provider.succeeded()
    return vectors


def document_reembed(*, document_id, beat=None) -> int:
    """Give the chunks of the document's searchable version vectors of the current model,
    batch by batch from their stored texts; returns how many chunks it re-embedded.

    `beat()` is called before each batch (the job says it is alive). A chunk already on
    the model is left alone, and a version that stopped being searchable meanwhile is
    left to the pipeline's own clean-up."""
    embedder = get_embedder()
    document = Document.objects.filter(id=document_id, deleted_at__isnull=True).first()
    if document is None or document.searchable_version is None:
        return 0
    version = document.searchable_version
    stale = list(
        Chunk.objects.filter(document=document, version=version)
        .exclude(embedding_model=embedder.name)
        .order_by("index")
        .values_list("id", "text")
    )
    done = 0
    size = settings.PAPERLANE_EMBED_BATCH_SIZE
    for start in range(0, len(stale), size):
        batch = stale[start : start + size]
        if beat is not None:
            beat()
        vectors = _embed(embedder, [text for _, text in batch])  # never inside a transaction
        packed = [pack_vector(vector) for vector in vectors]
        with transaction.atomic():
            for (chunk_id, _), data, vector in zip(batch, packed, vectors, strict=True):
                done += (
                    Chunk.objects.filter(id=chunk_id, version=version)
                    .exclude(embedding_model=embedder.name)
                    .update(
                        embedding=data,
                        embedding_model=embedder.name,
                        embedding_dimensions=len(vector),
                    )
                )
            # The index's column too, or a nearest-neighbour search would read the old model's
            # vectors under the new model's name.
            chunk_vectors_write(
                chunk_ids=[chunk_id for chunk_id, _ in batch], vectors=packed, model=embedder.name
            )
    return done
