"""The chunks nearest a query's vector (retrieval/vectors.py): by numpy on the tests' own
PostgreSQL, which has no pgvector, and through pgvector's HNSW index on a PostgreSQL with
it (tests/support/pgvector_server.py)."""

import hashlib
import uuid

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from documents.models import Document
from documents.services.content import document_chunks_upsert, document_make_searchable
from documents.services.organisations import organisation_create
from documents.vectors_sql import vector_column_ready, vector_index_name
from retrieval.embedding import get_embedder, pack_vector
from retrieval.vectors import nearest_chunks
from tests.support.pgvector_server import default_database, pgvector_server
from tests.support.vector_embedders import OtherSynonymEmbedder, SynonymEmbedder

EMBEDDER = "tests.support.vector_embedders.SynonymEmbedder"


@pytest.fixture
def synonyms(settings):
    settings.PAPERLANE_EMBEDDER = EMBEDDER
    return SynonymEmbedder()


@pytest.fixture(scope="session")
def pgvector(django_db_blocker):
    with django_db_blocker.unblock(), pgvector_server() as database:
        yield database


@pytest.fixture
def on_pgvector(pgvector, django_db_blocker):
    """The test's database is the PostgreSQL with pgvector, emptied after it."""
    with django_db_blocker.unblock(), default_database(pgvector):
        assert vector_column_ready()
        try:
            yield
        finally:
            call_command("flush", interactive=False, verbosity=0)


def _document(organisation, filename, texts, *, embedder=None, vectors=None) -> Document:
    """A settled document whose chunks are `texts`, embedded by `embedder` (the configured
    one by default) or given `vectors`, written by the embed stage's service."""
    embedder = embedder or get_embedder()
    document = Document.objects.create(
        organisation=organisation,
        filename=filename,
        kind="pdf",
        size_bytes=1,
        sha256=hashlib.sha256(filename.encode()).hexdigest(),
        storage_key=f"test/{uuid.uuid4()}.pdf",
    )
    document_chunks_upsert(
        document=document,
        start=0,
        texts=texts,
        vectors=[pack_vector(v) for v in (vectors or embedder.embed(texts))],
        model=embedder.name,
    )
    document_make_searchable(document=document)
    return document


def _world(embedder: SynonymEmbedder) -> dict:
    """An organisation whose documents share no word with "car" but one; beside it, chunks
    nearer the query that must never be found: another organisation's, a deleted
    document's, a version not yet searchable, another model's."""
    org = organisation_create(slug="acme", page_limit=1000)
    other = organisation_create(slug="globex", page_limit=1000)
    cars = _document(
        org,
        "cars.pdf",
        ["The automobile was parked outside the station", "Opening hours of the museum"],
    )
    bills = _document(org, "bills.pdf", ["Please pay the invoice by Friday"])
    leave = _document(org, "leave.pdf", ["Staff vacation starts in August"])
    _document(other, "theirs.pdf", ["car automobile"] * 3)
    deleted = _document(org, "deleted.pdf", ["motorcar"])
    Document.objects.filter(id=deleted.id).update(deleted_at=timezone.now())
    pending = _document(org, "pending.pdf", ["Minutes of the meeting"])
    pending.version = 2
    Document.objects.filter(id=pending.id).update(version=2)
    # Version 2's chunks, written by its embed stage; its run has not settled.
    document_chunks_upsert(
        document=pending,
        start=0,
        texts=["vehicle"],
        vectors=[pack_vector(embedder.embed(["vehicle"])[0])],
        model=embedder.name,
    )
    _document(org, "other-model.pdf", ["car"], embedder=OtherSynonymEmbedder())
    allowed = {
        (document.filename, index): chunk_id
        for document in (cars, bills, leave, pending)
        for chunk_id, index in document.chunks.filter(version=1).values_list("id", "index")
    }
    return {"org": org, "other": other, "allowed": allowed}


def _nearest(world, embedder, query: str, limit: int):
    return nearest_chunks(
        organisation_id=world["org"].id,
        model=embedder.name,
        vector=embedder.embed([query])[0],
        limit=limit,
    )


def _names(world, neighbours) -> list[tuple[str, int]]:
    by_id = {chunk_id: key for key, chunk_id in world["allowed"].items()}
    return [by_id.get(row.chunk_id, ("not allowed", row.index)) for row in neighbours.rows]


# --- Without pgvector: the exact scan ---------------------------------------------------


def test_the_scan_finds_a_synonym_that_shares_no_word_with_the_query(db, synonyms):
    assert not vector_column_ready(), "the tests' own PostgreSQL has no pgvector"
    world = _world(synonyms)

    neighbours = _nearest(world, synonyms, "car", limit=10)

    assert neighbours.method == "scan" and neighbours.complete
    assert _names(world, neighbours)[0] == ("cars.pdf", 0)
    assert neighbours.rows[0].similarity > 0.5


def test_the_scan_never_returns_others_deleted_unsettled_or_another_models_chunks(db, synonyms):
    world = _world(synonyms)

    neighbours = _nearest(world, synonyms, "car", limit=50)

    assert set(neighbours.chunk_ids) == set(world["allowed"].values())
    assert neighbours.rows[0].similarity >= neighbours.rows[-1].similarity


def test_the_scan_reads_one_document_when_asked(db, synonyms):
    world = _world(synonyms)
    bills = Document.objects.get(filename="bills.pdf")

    neighbours = nearest_chunks(
        organisation_id=world["org"].id,
        model=synonyms.name,
        vector=synonyms.embed(["car"])[0],
        limit=10,
        document_id=bills.id,
    )

    assert _names(world, neighbours) == [("bills.pdf", 0)]


def test_beyond_the_bound_the_scan_says_its_answer_is_incomplete(db, synonyms, settings):
    world = _world(synonyms)
    settings.PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS = len(world["allowed"])
    assert _nearest(world, synonyms, "car", limit=3).complete

    settings.PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS = len(world["allowed"]) - 1
    neighbours = _nearest(world, synonyms, "car", limit=3)

    assert not neighbours.complete and neighbours.rows == () and neighbours.method == "none"


# --- With pgvector: the HNSW index ------------------------------------------------------


def _explained(sql_marker: str):
    """An execute wrapper that EXPLAINs each statement holding `sql_marker` just before it
    runs, in its own transaction and settings; the plans land in the list it returns."""
    plans: list[str] = []

    def wrapper(execute, sql, params, many, context):
        if sql_marker in sql:
            raw = context["cursor"].cursor
            raw.execute("EXPLAIN " + sql, params)
            plans.append("\n".join(row[0] for row in raw.fetchall()))
        return execute(sql, params, many, context)

    return wrapper, plans


@pytest.mark.slow
def test_the_index_finds_a_synonym_and_explain_shows_it(on_pgvector, synonyms, settings):
    world = _world(synonyms)
    # Beside it, many chunks of another organisation nearer the query than any of its own
    # (each a little apart: an HNSW graph of identical vectors strands the others): the
    # walk must go past them all to give it its k.
    fleet = np.random.default_rng(5).normal(0, 0.1, (300, synonyms.dimensions))
    fleet[:, 0] += 1
    _document(world["other"], "fleet.pdf", ["fleet"] * 300, vectors=fleet.tolist())
    settings.PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS = 2
    wrapper, plans = _explained("<=>")

    with connection.execute_wrapper(wrapper):
        neighbours = _nearest(world, synonyms, "car", limit=len(world["allowed"]))

    assert neighbours.method == "index" and neighbours.complete
    assert _names(world, neighbours)[0] == ("cars.pdf", 0)
    assert set(neighbours.chunk_ids) == set(world["allowed"].values())
    index = vector_index_name(model=synonyms.name, dimensions=synonyms.dimensions)
    assert len(plans) == 1 and f"Index Scan using {index}" in plans[0], plans


@pytest.mark.slow
def test_below_the_bound_pgvector_compares_every_vector(on_pgvector, synonyms):
    world = _world(synonyms)

    neighbours = _nearest(world, synonyms, "car", limit=50)

    assert neighbours.method == "exact" and neighbours.complete
    assert _names(world, neighbours)[0] == ("cars.pdf", 0)
    assert set(neighbours.chunk_ids) == set(world["allowed"].values())


def _random_corpus(organisation, embedder, rng) -> None:
    for n in range(8):
        vectors = rng.standard_normal((25, embedder.dimensions)).tolist()
        _document(organisation, f"doc-{n}.pdf", [f"chunk {i}" for i in range(25)], vectors=vectors)


def _keys(neighbours) -> list[tuple[str, int]]:
    filenames = dict(Document.objects.values_list("id", "filename"))
    return [(filenames[row.document_id], row.index) for row in neighbours.rows]


@pytest.mark.slow
def test_the_index_and_the_scan_without_pgvector_give_the_same_neighbours(
    db, pgvector, django_db_blocker, synonyms, settings
):
    """The same vectors on both servers, the same queries: the same chunks in the same
    order, with the same similarities."""
    queries = np.random.default_rng(7).standard_normal((5, synonyms.dimensions)).tolist()

    def answers():
        org = organisation_create(slug="acme", page_limit=1000)
        _random_corpus(org, synonyms, np.random.default_rng(3))
        found = []
        for query in queries:
            neighbours = nearest_chunks(
                organisation_id=org.id, model=synonyms.name, vector=query, limit=10
            )
            found.append(
                (neighbours.method, _keys(neighbours), [r.similarity for r in neighbours.rows])
            )
        return found

    scanned = answers()
    settings.PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS = 50
    with django_db_blocker.unblock(), default_database(pgvector):
        try:
            indexed = answers()
        finally:
            call_command("flush", interactive=False, verbosity=0)

    for (scan_method, scan_keys, scan_sims), (index_method, index_keys, index_sims) in zip(
        scanned, indexed, strict=True
    ):
        assert (scan_method, index_method) == ("scan", "index")
        assert scan_keys == index_keys
        assert np.allclose(scan_sims, index_sims, atol=1e-5)


@pytest.mark.slow
def test_chunks_written_before_the_column_are_filled_by_the_command(
    on_pgvector, synonyms, settings
):
    world = _world(synonyms)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE documents_chunk SET embedding_vector = NULL")
        cursor.execute(f"DROP INDEX {vector_index_name(model=synonyms.name, dimensions=16)}")
    settings.PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS = 2
    assert _nearest(world, synonyms, "car", limit=3).method == "none"

    call_command("chunk_vectors", verbosity=0)

    neighbours = _nearest(world, synonyms, "car", limit=3)
    assert neighbours.method == "index"
    assert _names(world, neighbours)[0] == ("cars.pdf", 0)
