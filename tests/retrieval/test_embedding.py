"""The local embedder."""

import pytest

from retrieval.embedding import HashingEmbedder, pack_vector, unpack_vector


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
