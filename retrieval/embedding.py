"""Embedding providers.

The default provider is local, deterministic and offline: signed feature
hashing of words and word pairs into a fixed number of dimensions, L2
normalised. It needs no model download and gives the same vector for the same
text on every machine, which makes re-runs and tests exact. A hosted model
plugs in by naming another class in PAPERLANE_EMBEDDER: retrieval/http_embedder.py
speaks the OpenAI-compatible /v1/embeddings protocol. An embedder's `name` says its
model and dimensions; every chunk records it, and search compares a query only with
chunks of the query's model (pipeline/services/reembed.py moves chunks to a new model).
"""

import hashlib
import math
import re
import struct
from functools import cache
from typing import Protocol

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string


class Embedder(Protocol):
    name: str
    dimensions: int
    # Whether near vectors mean near meanings: search then ranks by them and finds chunks
    # that share no word with the query (PAPERLANE_SEARCH_FUSE_EMBEDDINGS=auto). A class
    # without the attribute is taken to have it.
    has_meaning: bool
    # Optional: the cosine below which a chunk found by meaning alone is no result (the
    # model's floor); PAPERLANE_EMBED_MIN_SIMILARITY where a class does not say.
    # min_similarity: float

    def embed(self, texts: list[str], *, max_seconds: float | None = None) -> list[list[float]]:
        """The texts' vectors; with `max_seconds` (a person waits) the provider gives up
        after about that long rather than wait for its limits or a slow answer."""
        ...


# The name of the provider's breaker (core/provider_breaker.py), shared by every caller:
# the embed stage's workers pause while it is open, and search ranks by text alone.
PROVIDER = "embedding-provider"

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    # Words hashed into dimensions: near vectors share words, not meaning (search does not
    # rank by them, PAPERLANE_SEARCH_FUSE_EMBEDDINGS).
    has_meaning = False

    def __init__(self, dimensions: int | None = None) -> None:
        self.dimensions = dimensions or settings.PAPERLANE_EMBEDDING_DIMENSIONS
        self.name = f"hashing-v1-{self.dimensions}"

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        words = _WORD.findall(text.lower())
        features = words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]
        for feature in features:
            digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
            value = int.from_bytes(digest, "little")
            vector[value % self.dimensions] += 1.0 if value >> 63 else -1.0
        norm = math.sqrt(sum(x * x for x in vector))
        return [x / norm for x in vector] if norm else vector

    def embed(self, texts: list[str], *, max_seconds: float | None = None) -> list[list[float]]:
        return [self._vector(text) for text in texts]  # local and quick: nothing to wait for


@cache
def _embedder(path: str) -> Embedder:
    return import_string(path)()


@receiver(setting_changed)
def _forget_embedder(*, setting: str, **kwargs) -> None:
    # A settings override (a test changing the model) takes effect at the next call.
    if setting.startswith(("PAPERLANE_EMBED", "PAPERLANE_EMBEDDING")):
        _embedder.cache_clear()


def get_embedder() -> Embedder:
    return _embedder(settings.PAPERLANE_EMBEDDER)


def pack_vector(vector: list[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)


def unpack_vector(data: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(data) // 4}f", data))
