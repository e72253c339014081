"""Known items: each real-world fixture found by what a person remembers of it (three
kinds of query built from its own text, tests/support/known_items.py), at MRR@10 of at
least 0.95 on each kind and at least that of SQLite FTS5 with bm25 over the same chunks.
The hashing embedder's cosine is measured fused and not: the default (not fused) must
score at least as well."""

import pytest

from retrieval.search import documents_search
from tests.support.known_items import KINDS, Fts5Baseline, known_items, mrr, real_world_chunks
from tests.support.runs import document_with_chunks

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def corpus():
    return real_world_chunks()


def test_each_document_is_found_by_what_a_person_remembers_of_it(org, other_org, corpus, settings):
    ids = {}
    for key, chunks in corpus.items():
        ids[str(document_with_chunks(org, key, chunks).id)] = key
        document_with_chunks(other_org, key, chunks)  # beside it, never found
    items = known_items(corpus)

    def ours(query):
        hits = documents_search(organisation=org, query=query, limit=10).hits
        return [ids[str(hit.document_id)] for hit in hits]

    measured = mrr(items, ours)
    settings.PAPERLANE_SEARCH_FUSE_EMBEDDINGS = "always"
    fused = mrr(items, ours)
    baseline = mrr(items, Fts5Baseline(corpus).search)
    print(f"\n{len(corpus)} documents, {len(items)} queries")
    for kind in KINDS:
        figures = (measured[kind], fused[kind], baseline[kind])
        print(f"{kind:12} ours %.3f  fused %.3f  fts5 %.3f" % figures)

    assert len(corpus) >= 18 and {item.kind for item in items} == set(KINDS)
    for kind in KINDS:
        assert measured[kind] >= 0.95, (kind, measured)
        assert measured[kind] >= baseline[kind], (kind, measured, baseline)
        assert measured[kind] >= fused[kind], (kind, measured, fused)
