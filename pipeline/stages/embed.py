"""embed: clean, split into chunks, embed in batches, upsert under stable ids.

Each chunk records its first and last page and the section it starts in (from the pages
and the outline extraction kept with the text), and the model and dimensions of its
vector.

Each call to the provider is counted by its breaker (core/provider_breaker.py): while the
provider keeps failing, the embed workers pause instead of failing a try of every run, and
a call that fails while the breaker is open raises ProviderOutage: the run waits for the
provider without using its tries.
Before each call but the first, made at once after the claim that proved the run is this
worker's, the worker asks the database whether it still holds the run: a run cancelled,
or a stage taken back from a worker that stopped answering, costs no call after that.

Chunk ids come from (document, version, index), so a re-run (a retry, a worker killed
half way, a re-embed with a new model: pipeline/services/reembed.py) overwrites the rows
already written instead of adding new ones, and a batch whose chunks are all there
already, with the same text and the current model's vectors, costs no provider call: a
re-run goes on where the last one stopped. Every batch commits with the run's progress
while the worker still holds the run, and the last batch and the removal of rows past the
new end commit with the stage's completion. A new version's chunks are not searchable
yet: settle makes the version searchable with its charge, and a run that ends without
success takes them with it.
"""

import hashlib

from django.conf import settings

from core.provider_breaker import breaker
from documents.models import Document
from documents.services.content import (
    ChunkPlace,
    document_chunks_finish,
    document_chunks_on_model,
    document_text_get,
)
from pipeline.errors import PermanentError, ProviderOutage, TransientError
from pipeline.stages.context import StageContext
from retrieval.chunking import Piece, chunk_document
from retrieval.embedding import PROVIDER, Embedder, get_embedder, pack_vector
from retrieval.vector_index import chunks_write

# A document whose text makes more chunks than this fails.
MAX_CHUNKS_PER_DOCUMENT = 25_000


def _embed(embedder: Embedder, batch: list[str]) -> list[list[float]]:
    provider = breaker(PROVIDER)
    try:
        vectors = embedder.embed(batch)
    except (TransientError, OSError) as exc:  # what a provider that is down or overloaded raises
        # Open after counting this failure (or already open): the provider fails every run,
        # so the run waits for it with its tries whole. Closed: others' calls go through and
        # this input may be the problem, so the try counts (a poison input dead-letters).
        pause = provider.failed() or provider.paused_for()
        if pause > 0:
            cause = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            raise ProviderOutage(
                f"Waits for the embedding provider, which keeps failing ({cause}); "
                "this try is not counted.",
                pause=pause,
            ) from exc
        raise
    provider.succeeded()
    return vectors


def _pieces(document: Document) -> list[Piece]:
    extracted = document_text_get(document=document)
    if extracted is None:
        raise PermanentError("The document's text is missing; retry the run.", code="text_missing")
    pieces = chunk_document(
        extracted.text, page_starts=extracted.page_starts, outline=extracted.outline
    )
    limit = MAX_CHUNKS_PER_DOCUMENT
    if len(pieces) > limit:
        raise PermanentError(
            f"The document's text makes {len(pieces):,} chunks; the limit is {limit:,} chunks "
            "for one document.",
            code="too_many_chunks",
        )
    return pieces


def _digest(text: str) -> str:
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def _first_try(ctx: StageContext) -> bool:
    """The run's first try at its first generation: no chunk of its version exists yet."""
    return ctx.run.generation == 0 and ctx.run.stage_attempts <= 1


def _kept(ctx: StageContext, model: str) -> dict[int, str]:
    """The chunks of this version already embedded by `model` (index -> MD5 of the text)."""
    if _first_try(ctx):
        return {}
    return document_chunks_on_model(document=ctx.document, model=model)


def _batch_chunks(
    ctx: StageContext, embedder: Embedder, start: int, batch: list[Piece]
) -> dict:
    texts = [piece.text for piece in batch]
    # Each call is paid for and slow: none for a run that was cancelled, or taken back
    # from this worker, since the last batch.
    ctx.check()
    vectors = _embed(embedder, texts)  # never inside a transaction: the provider is slow
    return {
        "document": ctx.document,
        "start": start,
        "texts": texts,
        "vectors": [pack_vector(vector) for vector in vectors],
        "model": embedder.name,
        "places": [ChunkPlace(p.page_start, p.page_end, p.section) for p in batch],
    }


def run(ctx: StageContext) -> None:
    document = ctx.document
    pieces = _pieces(document)
    embedder = get_embedder()
    kept = _kept(ctx, embedder.name)
    total, size = len(pieces), settings.PAPERLANE_EMBED_BATCH_SIZE
    ctx.progress(0, total)
    for start in range(0, total, size):
        batch = pieces[start : start + size]
        done = bool(kept) and all(
            kept.get(start + n) == _digest(piece.text) for n, piece in enumerate(batch)
        )
        chunks = None if done else _batch_chunks(ctx, embedder, start, batch)
        if start + size >= total:
            # The last batch commits with the completion: one transaction fewer, and the
            # only one for most documents.
            with ctx.complete():
                if chunks is not None:
                    chunks_write(**chunks)
                if not _first_try(ctx):  # an earlier, longer try's chunks past the end
                    document_chunks_finish(document=document, count=total)
            return
        if chunks is None:
            ctx.progress(start + len(batch), total)
            continue
        # Committed with the progress, only while the run is still ours: a run cancelled
        # (or its document deleted) meanwhile gets no chunk back from a late batch.
        with ctx.checkpoint(start + len(batch), total):
            chunks_write(**chunks)
    with ctx.complete():  # no text, no chunks
        document_chunks_finish(document=document, count=0)
