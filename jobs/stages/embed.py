"""embed: clean, split into chunks, embed in batches, upsert under stable ids.

Chunk ids come from (document, version, index), so a re-run (a retry, a
worker killed half way) overwrites the rows it already wrote instead of adding
new ones; rows past the new end are removed in the final transaction.
"""

from django.conf import settings
from django.utils import timezone

from documents.models import Chunk, Document, DocumentText
from jobs.embedding import get_embedder, pack_vector, rate_limit_wait
from jobs.errors import PermanentError
from jobs.text import clean_text, split_chunks


def run(ctx) -> None:
    document = ctx.document
    extracted = DocumentText.objects.filter(document=document, version=document.version).first()
    if extracted is None:
        raise PermanentError("The document's text is missing; retry the run.", code="text_missing")
    pieces = split_chunks(clean_text(extracted.text))
    embedder = get_embedder()
    batch_size = settings.PAPERLANE_EMBED_BATCH_SIZE
    ctx.progress(0, len(pieces))
    for start in range(0, len(pieces), batch_size):
        batch = pieces[start : start + batch_size]
        rate_limit_wait()
        vectors = embedder.embed(batch)
        now = timezone.now()
        Chunk.objects.bulk_create(
            [
                Chunk(
                    id=Chunk.stable_id(document_id=document.id, version=document.version, index=i),
                    document=document,
                    version=document.version,
                    index=i,
                    text=text,
                    embedding=pack_vector(vector),
                    embedding_model=embedder.name,
                    created_at=now,
                )
                for i, (text, vector) in enumerate(zip(batch, vectors, strict=True), start=start)
            ],
            update_conflicts=True,
            unique_fields=["id"],
            update_fields=["text", "embedding", "embedding_model"],
        )
        ctx.progress(start + len(batch), len(pieces))

    with ctx.complete():
        Chunk.objects.filter(
            document=document, version=document.version, index__gte=len(pieces)
        ).delete()
        Document.objects.filter(id=document.id).update(chunk_count=len(pieces))
