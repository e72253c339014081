"""The local embedder and the shared embedding rate limit (real Redis)."""

import time

import pytest

from retrieval.embedding import HashingEmbedder, pack_vector, rate_limit_wait, unpack_vector


def test_the_local_embedder_is_deterministic_and_normalised():
    embedder = HashingEmbedder(dimensions=64)

    first, again, other = embedder.embed(
        ["quarterly revenue rose", "quarterly revenue rose", "the cat sat on the mat"]
    )

    assert first == again
    assert first != other
    assert sum(x * x for x in first) == pytest.approx(1.0)
    similar = embedder.embed(["quarterly revenue rose sharply"])[0]
    assert sum(a * b for a, b in zip(first, similar, strict=True)) > sum(
        a * b for a, b in zip(first, other, strict=True)
    )


def test_vectors_round_trip_through_their_stored_bytes():
    vector = HashingEmbedder(dimensions=16).embed(["hello world"])[0]

    assert unpack_vector(pack_vector(vector)) == pytest.approx(vector)
    assert len(pack_vector(vector)) == 16 * 4


def test_the_shared_embedding_budget_paces_requests(redis_conn, settings):
    settings.PAPERLANE_EMBED_RATE_PER_SECOND = 5
    started = time.monotonic()

    waits = [rate_limit_wait(key="test:ratelimit") for _ in range(10)]

    elapsed = time.monotonic() - started
    # A burst of 5 goes at once; the other 5 are paced at 5 per second.
    assert sum(1 for w in waits if w == 0) >= 5
    assert 0.7 <= elapsed <= 2.0


def test_no_limit_means_no_wait(redis_conn, settings):
    settings.PAPERLANE_EMBED_RATE_PER_SECOND = 0

    assert rate_limit_wait(key="test:ratelimit") == 0
