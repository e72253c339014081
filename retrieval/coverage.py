"""One model at a time: which of an organisation's searchable chunks carry the current
embedder's vectors.

Every chunk records the name of the model that made its vector (the name says the
dimensions too); search compares a query only with chunks of the query's model. When
the configured embedder changes, a re-embed (pipeline/services/reembed.py) gives the
chunks of each document's searchable version vectors of the new model; these say how far
it has come and which documents it still has to do.
"""

from typing import NamedTuple

from django.db.models import Count, F, Q, QuerySet

from documents.models import Chunk, Organisation
from retrieval.embedding import get_embedder


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
    """The ids of the documents whose searchable chunks are not all on the current model,
    oldest document first."""
    chunks = _searchable_chunks().exclude(embedding_model=get_embedder().name)
    if organisation is not None:
        chunks = chunks.filter(document__organisation=organisation)
    rows = chunks.values_list("document_id", "document__created_at")
    return rows.distinct().order_by("document__created_at", "document_id")
