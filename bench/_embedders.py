"""Embedding providers for the benchmarks, named through PAPERLANE_EMBEDDER in the
workers' environment: `bench._embedders.OutageEmbedder`.

This module is imported by the workers, so it imports only the project (never
`_common`, which would point Django at the bench database on import).
"""

import os

from pipeline.errors import TransientError
from retrieval.embedding import HashingEmbedder

# The bench creates this file to start a provider outage and removes it to end it.
OUTAGE_FLAG_ENV = "PAPERLANE_BENCH_EMBED_OUTAGE_FLAG"


class OutageEmbedder(HashingEmbedder):
    """The local embedder, except that it answers 503 while the outage flag file exists,
    as a hosted provider does during an incident: the embed stage sees a TransientError
    and retries with backoff."""

    def __init__(self, dimensions: int | None = None) -> None:
        super().__init__(dimensions)
        self.flag = os.environ.get(OUTAGE_FLAG_ENV, "")
        if not self.flag:
            raise RuntimeError(f"OutageEmbedder needs {OUTAGE_FLAG_ENV} set to a file path")

    def embed(self, texts: list[str], *, max_seconds=None) -> list[list[float]]:
        if os.path.exists(self.flag):
            raise TransientError("provider answered 503")
        return super().embed(texts)
