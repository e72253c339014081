"""Search finds by meaning too: the chunks nearest the query's embedding join those found
by its words, when the embedder's vectors have a meaning (an embedder whose geometry the
test controls: synonyms share a direction). Here on the tests' PostgreSQL, without
pgvector (the exact scan); through the HNSW index in test_vectors.py."""

import pytest

from documents.models import Chunk
from retrieval.search import documents_search
from tests.support.runs import document_with_chunks
from tests.support.vector_embedders import SynonymEmbedder
from tests.support.vector_world import vector_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def synonyms(settings):
    settings.PAPERLANE_EMBEDDER = "tests.support.vector_embedders.SynonymEmbedder"
    return SynonymEmbedder()


def _names(results) -> list[str]:
    return [hit.filename for hit in results.hits]


def test_a_document_that_shares_no_word_with_the_query_is_found_by_its_meaning(api, synonyms):
    world = vector_world(synonyms)

    results = documents_search(organisation=world["org"], query="car")

    # "other-model.pdf" holds the word (found by text); "cars.pdf" only "automobile".
    assert _names(results)[:2] == ["other-model.pdf", "cars.pdf"]
    assert results.neighbours and results.ranking == "embedding"
    # A chunk found is on another model: 5 of the 6 searchable chunks are on this one.
    assert results.model_share == pytest.approx(5 / 6, abs=1e-4)
    # The API's answer (the `api` client's organisation is the world's "acme").
    body = api.get("/api/v1/search", {"q": "car"}).json()
    assert [hit["filename"] for hit in body["results"]][:2] == ["other-model.pdf", "cars.pdf"]
    assert (body["neighbours"], body["model_share"]) == (True, pytest.approx(5 / 6, abs=1e-4))


def test_without_ranking_by_embedding_only_the_words_find(synonyms, settings):
    world = vector_world(synonyms)
    settings.PAPERLANE_SEARCH_FUSE_EMBEDDINGS = "never"

    results = documents_search(organisation=world["org"], query="car")

    assert _names(results) == ["other-model.pdf"]
    assert not results.neighbours and results.ranking == "text"


def test_beyond_the_scan_bound_without_an_index_the_answer_says_the_words_alone_found(
    synonyms, settings
):
    world = vector_world(synonyms)
    settings.PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS = 2

    results = documents_search(organisation=world["org"], query="car")

    assert "cars.pdf" not in _names(results)
    assert not results.neighbours


def test_during_a_re_embed_the_answer_says_which_share_is_on_the_current_model(org, settings):
    settings.PAPERLANE_SEARCH_FUSE_EMBEDDINGS = "always"
    document_with_chunks(org, "old.pdf", ["tide tables", "harbour tide"])
    settings.PAPERLANE_EMBEDDING_DIMENSIONS = 64  # the model changes: hashing-v1-64
    document_with_chunks(org, "new.pdf", ["tide clock"])

    during = documents_search(organisation=org, query="tide")
    Chunk.objects.update(embedding_model="hashing-v1-64")  # as once the re-embed is done
    after = documents_search(organisation=org, query="tide")

    assert during.model_share == pytest.approx(1 / 3, abs=1e-4)
    assert after.model_share is None
