"""Search by meaning with a provider whose vectors carry it (tests/support/concepts.py:
sixteen concepts, served on loopback by the OpenAI protocol and called through the HTTP
provider): documents processed by real worker processes are found by queries that share
no word with them, nonsense finds nothing, and the scores say so. And a provider that
never answers costs searches no more than their budget, then nothing at all."""

import io
import time

import pytest
from docx import Document as DocxDocument

from core.provider_breaker import breaker
from core.redis import redis_connection
from pipeline.models import RunStatus
from retrieval.embedding import PROVIDER
from retrieval.search import documents_search
from tests.support.concepts import (
    CONCEPTS,
    DIMENSIONS,
    DOCUMENTS,
    MODEL,
    NONSENSE,
    ConceptEmbedder,
    ConceptServer,
)
from tests.support.embedding_server import slow
from tests.support.pipeline import running_workers, wait_terminal
from tests.support.runs import document_with_chunks
from tests.support.uploads import accepted_run

# The margin by which a query's target outscores every result that is not one, on this
# set (bench/meaning.py measures the whole labelled set, documents that only touch on a
# concept included).
MARGIN = 0.25


def provider(server: ConceptServer) -> dict[str, str]:
    return {
        "PAPERLANE_EMBEDDER": "retrieval.http_embedder.HttpEmbedder",
        "PAPERLANE_EMBED_URL": server.url.removesuffix("/embeddings"),  # the base URL
        "PAPERLANE_EMBED_MODEL": MODEL,
        "PAPERLANE_EMBEDDING_DIMENSIONS": str(DIMENSIONS),
        "PAPERLANE_EMBED_API_KEY_ENV": "",
    }


@pytest.fixture
def server(settings):
    with ConceptServer() as running:
        for name, value in provider(running).items():
            setattr(settings, name, int(value) if value.isdigit() else value)
        yield running


def _docx(text: str) -> bytes:
    document = DocxDocument()
    document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_documents_processed_by_workers_are_found_by_meaning_and_nonsense_finds_nothing(
    api, org, server
):
    main = {name: text for name, text in DOCUMENTS.items() if "-brief" not in name}
    with running_workers(concurrency="extract=1,ocr=0,embed=1", **provider(server)):
        runs = [
            accepted_run(api, _docx(text), name=name.replace(".pdf", ".docx"))
            for name, text in main.items()
        ]
        finished = wait_terminal([run.id for run in runs], timeout=120)
    assert {run.status for run in finished.values()} == {RunStatus.SUCCEEDED}

    target_scores, other_scores = [], []
    for concept, (_, asked) in CONCEPTS.items():
        for query in (asked[0], f"{asked[1]} {asked[5]}"):
            results = api.get("/api/v1/search", {"q": query}).json()
            assert results["ranking"] == "embedding"
            names = [hit["filename"] for hit in results["results"]]
            assert names[0] == f"{concept}.docx", (query, names)
            target_scores.append(results["results"][0]["score"])
            other_scores += [hit["score"] for hit in results["results"][1:]]
    for query in NONSENSE:
        assert api.get("/api/v1/search", {"q": query}).json()["results"] == [], query

    assert min(target_scores) >= max(other_scores, default=0.0) + MARGIN
    assert all(0 <= score <= 1 for score in target_scores + other_scores)


@pytest.mark.django_db
def test_two_concepts_find_both_and_the_words_still_come_first(org, server):
    embedder = ConceptEmbedder()
    for name in ("medicine.pdf", "vehicle.pdf", "ocean.pdf"):
        document_with_chunks(org, name, [DOCUMENTS[name]], embedder=embedder)

    both = documents_search(organisation=org, query="doctor car")
    worded = documents_search(organisation=org, query="tide")  # a word of ocean.pdf

    assert {hit.filename for hit in both.hits} == {"medicine.pdf", "vehicle.pdf"}
    assert worded.hits[0].filename == "ocean.pdf"
    assert worded.hits[0].score > 0.9  # its document holds the word: its words say so


@pytest.mark.django_db
def test_a_provider_that_never_answers_costs_a_search_its_budget_then_nothing(
    org, server, settings, redis_conn
):
    settings.PAPERLANE_SEARCH_EMBED_BUDGET_MS = 300
    document_with_chunks(
        org, "medicine.pdf", [DOCUMENTS["medicine.pdf"]], embedder=ConceptEmbedder()
    )
    server.fail_until_told(slow(30))  # accepts, and never answers in time

    took = []
    for n in range(20):
        started = time.perf_counter()
        results = documents_search(organisation=org, query=f"physician {n}")
        took.append((time.perf_counter() - started) * 1000)
        assert results.embedding_unavailable and results.ranking == "text"
        assert [hit.filename for hit in results.hits] == ["medicine.pdf"]  # its words find it
    asked = len(server.requests)

    took.sort()
    assert took[int(len(took) * 0.95) - 1] <= 300 + 50, took
    # The breaker opened after its failures in a row: no search asked after that.
    assert asked == 3
    assert redis_connection().hget(breaker(PROVIDER).key, "opens") == b"1"


@pytest.mark.django_db
def test_the_same_query_again_does_not_call_the_provider(org, server):
    document_with_chunks(
        org, "medicine.pdf", [DOCUMENTS["medicine.pdf"]], embedder=ConceptEmbedder()
    )

    first = documents_search(organisation=org, query="doctor")
    again = documents_search(organisation=org, query="doctor")

    assert len(server.requests) == 1
    assert first.ranking == again.ranking == "embedding"
    assert first.hits == again.hits
