"""The chunks nearest a query's vector (retrieval/vectors.py): by numpy on the tests' own
PostgreSQL, which has no pgvector, and through pgvector's HNSW index on a PostgreSQL with
it (tests/support/pgvector_server.py)."""

import json
import threading
from contextlib import ExitStack, contextmanager

import numpy as np
import psycopg
import pytest
from django.core.management import call_command
from django.db import connection, transaction

from documents.models import Chunk, Document
from documents.services.organisations import organisation_create
from pipeline.sweeper import sweep_once
from retrieval import vector_index
from retrieval.embedding import HashingEmbedder, pack_vector
from retrieval.search import documents_search
from retrieval.vector_index import (
    chunk_vectors_backfill,
    chunks_write,
    vector_column_add,
    vector_column_ready,
    vector_index_exists,
    vector_index_name,
    vector_text,
)
from retrieval.vectors import nearest_chunks
from tests.support.locks import another_connection, wait_for_lock_waiters
from tests.support.pgvector_server import default_database, pgvector_server
from tests.support.runs import document_with_chunks
from tests.support.vector_embedders import SynonymEmbedder
from tests.support.vector_world import vector_world

EMBEDDER = "tests.support.vector_embedders.SynonymEmbedder"


@pytest.fixture
def synonyms(settings):
    settings.PAPERLANE_EMBEDDER = EMBEDDER
    return SynonymEmbedder()


@pytest.fixture(scope="session")
def pgvector(django_db_blocker):
    # Unblocked while the server starts and its database migrates only: the tests after
    # the first that asks for it keep their own access (none, unless they ask).
    with ExitStack() as stack:
        with django_db_blocker.unblock():
            database = stack.enter_context(pgvector_server())
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


@contextmanager
def _lock_timeout(value: str):
    """The test's connection waits on a lock at most `value` inside the block."""
    with connection.cursor() as cursor:
        cursor.execute(f"SET lock_timeout = '{value}'")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("RESET lock_timeout")


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
    world = vector_world(synonyms)

    neighbours = _nearest(world, synonyms, "car", limit=10)

    assert neighbours.method == "scan" and neighbours.complete
    assert _names(world, neighbours)[0] == ("cars.pdf", 0)
    assert neighbours.rows[0].similarity > 0.5


def test_the_scan_never_returns_others_deleted_unsettled_or_another_models_chunks(db, synonyms):
    world = vector_world(synonyms)

    neighbours = _nearest(world, synonyms, "car", limit=50)

    assert set(neighbours.chunk_ids) == set(world["allowed"].values())
    assert neighbours.rows[0].similarity >= neighbours.rows[-1].similarity


def test_the_scan_reads_one_document_when_asked(db, synonyms):
    world = vector_world(synonyms)
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
    world = vector_world(synonyms)
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
    world = vector_world(synonyms)
    # Beside it, many chunks of another organisation nearer the query than any of its own
    # (each a little apart: an HNSW graph of identical vectors strands the others): the
    # walk must go past them all to give it its k.
    fleet = np.random.default_rng(5).normal(0, 0.1, (300, synonyms.dimensions))
    fleet[:, 0] += 1
    document_with_chunks(world["other"], "fleet.pdf", ["fleet"] * 300, vectors=fleet.tolist())
    settings.PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS = 2
    # Statistics or none, the plan walks the index.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE documents_chunk, documents_document")
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
    world = vector_world(synonyms)

    neighbours = _nearest(world, synonyms, "car", limit=50)

    assert neighbours.method == "exact" and neighbours.complete
    assert _names(world, neighbours)[0] == ("cars.pdf", 0)
    assert set(neighbours.chunk_ids) == set(world["allowed"].values())


def _random_corpus(organisation, embedder, rng) -> None:
    for n in range(8):
        vectors = rng.standard_normal((25, embedder.dimensions)).tolist()
        document_with_chunks(
            organisation, f"doc-{n}.pdf", [f"chunk {i}" for i in range(25)], vectors=vectors
        )


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
    world = vector_world(synonyms)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE documents_chunk SET embedding_vector = NULL")
        cursor.execute(f"DROP INDEX {vector_index_name(model=synonyms.name, dimensions=16)}")
    settings.PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS = 2
    assert _nearest(world, synonyms, "car", limit=3).method == "none"

    call_command("chunk_vectors", verbosity=0)

    neighbours = _nearest(world, synonyms, "car", limit=3)
    assert neighbours.method == "index"
    assert _names(world, neighbours)[0] == ("cars.pdf", 0)


@pytest.mark.slow
def test_a_role_that_may_not_create_the_extension_still_migrates(pgvector, django_db_blocker):
    """A managed database's ordinary role: the server offers pgvector, the role may not
    create it (it is not a trusted extension). Migrations go through, search scans."""
    admin = {"host": pgvector["HOST"], "port": pgvector["PORT"], "user": "postgres"}
    with psycopg.connect(**admin, dbname="postgres", autocommit=True) as conn:
        conn.execute("CREATE ROLE plain LOGIN")
        conn.execute("CREATE DATABASE plain_owned OWNER plain")
    try:
        with (
            django_db_blocker.unblock(),
            default_database({**pgvector, "USER": "plain", "NAME": "plain_owned"}),
        ):
            call_command("migrate", verbosity=0, interactive=False)
            assert not vector_column_ready()
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'")
                assert cursor.fetchone()[0] == 0
    finally:
        with psycopg.connect(**admin, dbname="postgres", autocommit=True) as conn:
            conn.execute("DROP DATABASE IF EXISTS plain_owned WITH (FORCE)")
            conn.execute("DROP ROLE IF EXISTS plain")


@pytest.mark.slow
def test_chunks_written_again_by_a_new_model_are_found_by_their_new_vectors(on_pgvector, settings):
    org = organisation_create(slug="acme", page_limit=1000)
    texts = ["The automobile was parked outside the station", "Please pay the invoice"]
    # Embedded by a model of the same size whose geometry knows no synonym.
    document = document_with_chunks(org, "cars.pdf", texts, embedder=HashingEmbedder(dimensions=16))
    settings.PAPERLANE_EMBEDDER = EMBEDDER
    synonyms = SynonymEmbedder()

    # As the embed stage of a re-embed writes them: the same chunks, the new model's vectors.
    vectors = [pack_vector(vector) for vector in synonyms.embed(texts)]
    chunks_write(document=document, start=0, texts=texts, vectors=vectors, model=synonyms.name)
    neighbours = nearest_chunks(
        organisation_id=org.id, model=synonyms.name, vector=synonyms.embed(["car"])[0], limit=5
    )

    # Read from the vector column: the new model's vectors, not the old ones under its name.
    assert [row.index for row in neighbours.rows] == [0, 1]
    expected = float(np.dot(synonyms.embed(["car"])[0], synonyms.embed([texts[0]])[0]))
    assert neighbours.rows[0].similarity == pytest.approx(expected, abs=1e-5)


@pytest.mark.slow
def test_a_new_models_first_chunks_written_in_a_transaction_get_its_index_after_the_commit(
    on_pgvector, synonyms
):
    name = vector_index_name(model=synonyms.name, dimensions=synonyms.dimensions)
    with connection.cursor() as cursor:  # built by an earlier test: flush keeps indexes
        cursor.execute(f"DROP INDEX IF EXISTS {name}")
    org = organisation_create(slug="acme", page_limit=1000)
    # As in the embed stage: the chunks, with their deferred foreign-key checks pending, and
    # the stage's completion in one transaction.
    with transaction.atomic():
        document_with_chunks(org, "cars.pdf", ["The automobile was parked outside"])
        assert not vector_index_exists(model=synonyms.name, dimensions=synonyms.dimensions)

    assert vector_index_exists(model=synonyms.name, dimensions=synonyms.dimensions)


@pytest.mark.slow
def test_search_finds_a_synonym_through_the_index(on_pgvector, synonyms, settings):
    world = vector_world(synonyms)
    settings.PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS = 2  # the organisation is beyond it
    wrapper, plans = _explained("<=>")

    with connection.execute_wrapper(wrapper):
        results = documents_search(organisation=world["org"], query="car")

    # "cars.pdf" shares no word with the query: only its meaning, through the index, finds it.
    assert [hit.filename for hit in results.hits][:2] == ["other-model.pdf", "cars.pdf"]
    assert results.neighbours
    index = vector_index_name(model=synonyms.name, dimensions=synonyms.dimensions)
    assert len(plans) == 1 and f"Index Scan using {index}" in plans[0], plans


@pytest.mark.slow
def test_the_backfill_leaves_alone_a_vector_a_reembed_wrote_meanwhile(on_pgvector, synonyms):
    """The backfill reads a chunk with no vector; before it writes, a re-embed (another
    connection) gives the chunk a new model's bytes and vector and commits: the backfill
    must not write the old bytes over them."""
    world = vector_world(synonyms)
    with connection.cursor() as cursor:
        cursor.execute("UPDATE documents_chunk SET embedding_vector = NULL")
    chunk_id = world["allowed"][("cars.pdf", 0)]
    new = HashingEmbedder(dimensions=16)
    new_vector = new.embed(["The automobile was parked outside the station"])[0]
    reembed = another_connection()  # a transaction, left open until the backfill waits
    reembed.execute(
        "UPDATE documents_chunk SET embedding = %s, embedding_model = %s, "
        "embedding_vector = %s::vector WHERE id = %s",
        [pack_vector(new_vector), new.name, vector_text(pack_vector(new_vector)), chunk_id],
    )
    # Opened here: in another thread Django's connection is the tests' own database.
    watcher = another_connection(autocommit=True)
    writing, order = "UPDATE documents_chunk SET", []

    def commit_once_the_backfill_waits():
        try:
            wait_for_lock_waiters(1, like=writing + "%", observer=watcher)
            order.append("re-embed commits")
        finally:
            reembed.commit()
            reembed.close()
            watcher.close()

    def noted(execute, sql, params, many, context):
        if sql.startswith(writing):
            order.append("backfill writes")
        return execute(sql, params, many, context)

    committer = threading.Thread(target=commit_once_the_backfill_waits)
    committer.start()
    try:
        with connection.execute_wrapper(noted):
            filled = chunk_vectors_backfill()
    finally:
        committer.join(60)

    # The re-embed committed while the backfill's write waited on it, not before it read.
    assert order == ["backfill writes", "re-embed commits"]

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT embedding_model, embedding_vector::text FROM documents_chunk WHERE id = %s",
            [chunk_id],
        )
        model, written = cursor.fetchone()
    assert model == new.name
    assert np.allclose(json.loads(written), new_vector, atol=1e-6)
    assert sum(filled.values()) == len(Chunk.objects.all()) - 1


def _slowed(seconds: float, marker: str = "c.embedding_model = %s"):
    """Each statement of the nearest-neighbour lookup (those holding `marker`) is preceded
    by a pause on the server, as a large organisation's scan would take."""

    def wrapper(execute, sql, params, many, context):
        if marker in sql:
            execute(f"SELECT pg_sleep({seconds})", None, False, context)
        return execute(sql, params, many, context)

    return wrapper


def test_a_scan_past_the_search_timeout_gives_no_neighbours_and_says_so(db, synonyms, settings):
    world = vector_world(synonyms)
    settings.PAPERLANE_SEARCH_TIMEOUT_MS = 100

    with connection.execute_wrapper(_slowed(2)):
        neighbours = _nearest(world, synonyms, "car", limit=3)

    assert neighbours.rows == () and not neighbours.complete and neighbours.method == "none"
    # The next search is not bound by it, nor by the caller's setting left behind.
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"
    assert _nearest(world, synonyms, "car", limit=3).method == "scan"


def test_a_search_whose_neighbours_time_out_ranks_by_text(db, synonyms, settings):
    world = vector_world(synonyms)
    settings.PAPERLANE_SEARCH_FUSE_EMBEDDINGS = "always"
    assert documents_search(organisation=world["org"], query="invoice").neighbours
    settings.PAPERLANE_SEARCH_TIMEOUT_MS = 100

    with connection.execute_wrapper(_slowed(2)):
        results = documents_search(organisation=world["org"], query="invoice")

    assert results.hits[0].filename == "bills.pdf"
    assert not results.neighbours


@pytest.mark.slow
def test_the_index_walk_past_the_search_timeout_gives_no_neighbours(
    on_pgvector, synonyms, settings
):
    world = vector_world(synonyms)
    settings.PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS = 2
    assert _nearest(world, synonyms, "car", limit=3).method == "index"
    settings.PAPERLANE_SEARCH_TIMEOUT_MS = 100

    with connection.execute_wrapper(_slowed(2, marker="<=>")):  # the walk itself
        neighbours = _nearest(world, synonyms, "car", limit=3)

    assert neighbours.rows == () and not neighbours.complete and neighbours.method == "none"


@pytest.mark.slow
def test_the_index_walk_in_a_callers_transaction_leaves_its_settings_as_they_were(
    on_pgvector, synonyms, settings
):
    world = vector_world(synonyms)
    settings.PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS = 2
    connection.close()  # a new session: the vector library not loaded, its settings unknown
    names = ["statement_timeout", "plan_cache_mode", "jit", "enable_sort", "hnsw.ef_search"]

    def current() -> list:
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting(n, true) FROM unnest(%s::text[]) n", [names])
            return [value for (value,) in cursor.fetchall()]

    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL statement_timeout = '7s'")
        neighbours = _nearest(world, synonyms, "car", limit=3)
        after = current()

    assert neighbours.method == "index" and neighbours.complete
    # The walk's ef_search gone back to pgvector's own default, now that it is loaded.
    assert after == ["7s", "auto", "on", "on", "40"]


def _drop_index(model: str, dimensions: int) -> str:
    name = vector_index_name(model=model, dimensions=dimensions)
    with connection.cursor() as cursor:  # built by an earlier test: flush keeps indexes
        cursor.execute(f"DROP INDEX IF EXISTS {name}")
    return name


@pytest.mark.slow
def test_a_new_models_index_is_built_concurrently_after_the_commit(on_pgvector, synonyms):
    """Concurrently: other organisations' chunk writes go on while it scans the table."""
    name = _drop_index(synonyms.name, synonyms.dimensions)
    org = organisation_create(slug="acme", page_limit=1000)
    builds = []

    def record(execute, sql, params, many, context):
        if "CREATE INDEX" in sql and name in sql:
            builds.append((sql, context["connection"].in_atomic_block))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record), transaction.atomic():
        document_with_chunks(org, "cars.pdf", ["The automobile was parked outside"])

    assert vector_index_exists(model=synonyms.name, dimensions=synonyms.dimensions)
    assert [(sql.split(" IF ")[0], atomic) for sql, atomic in builds] == [
        ("CREATE INDEX CONCURRENTLY", False)
    ]


@pytest.mark.slow
def test_a_failed_index_build_after_the_commit_keeps_the_chunks_and_is_logged(
    on_pgvector, synonyms, caplog
):
    """Another session holds a lock the build needs past the build's lock_timeout: the
    chunks are committed, the stage goes on, a warning names the command to run."""
    _drop_index(synonyms.name, synonyms.dimensions)
    org = organisation_create(slug="acme", page_limit=1000)
    with another_connection() as other:
        # Writes pass this lock; an index build (plain or concurrent) waits for it.
        other.execute("LOCK TABLE documents_chunk IN SHARE UPDATE EXCLUSIVE MODE")
        with _lock_timeout("200ms"), transaction.atomic():
            document_with_chunks(org, "cars.pdf", ["The automobile was parked outside"])
        other.rollback()

    assert Chunk.objects.filter(document__organisation=org).count() == 1
    assert not vector_index_exists(model=synonyms.name, dimensions=synonyms.dimensions)
    assert "manage.py chunk_vectors" in caplog.text
    # The next write of the model builds it (the invalid index the failure left is replaced).
    with transaction.atomic():
        document_with_chunks(org, "bills.pdf", ["Please pay the invoice"])
    assert vector_index_exists(model=synonyms.name, dimensions=synonyms.dimensions)


@pytest.mark.slow
def test_the_current_models_index_can_be_built_before_any_chunk_of_it(on_pgvector, settings):
    settings.PAPERLANE_EMBEDDER = EMBEDDER
    synonyms = SynonymEmbedder()
    _drop_index(synonyms.name, synonyms.dimensions)

    call_command("chunk_vectors", "--current-model", verbosity=0)

    assert vector_index_exists(model=synonyms.name, dimensions=synonyms.dimensions)
    assert not Chunk.objects.exists()


@pytest.mark.slow
def test_the_housekeeping_fills_chunks_without_a_vector_in_bounded_passes(
    on_pgvector, synonyms, settings, monkeypatch
):
    """Chunks written before migration 0017 added the column: the sweeper fills them, a
    bounded number per pass, and builds their model's index."""
    world = vector_world(synonyms)
    total = Chunk.objects.count()
    with connection.cursor() as cursor:
        cursor.execute("UPDATE documents_chunk SET embedding_vector = NULL")
    _drop_index(synonyms.name, synonyms.dimensions)
    settings.PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS = 2
    assert _nearest(world, synonyms, "car", limit=3).method == "none"
    monkeypatch.setattr(vector_index, "HOUSEKEEPING_BACKFILL_CHUNKS", 3)

    passes = []
    while not passes or passes[-1]:
        passes.append(sweep_once(housekeeping=True).housekeeping["chunk vectors filled"])

    assert passes[:-1] == [3] * (total // 3) + ([total % 3] if total % 3 else [])
    neighbours = _nearest(world, synonyms, "car", limit=3)
    assert neighbours.method == "index"
    assert _names(world, neighbours)[0] == ("cars.pdf", 0)


@pytest.mark.slow
def test_a_process_notices_the_column_added_after_it_asked(on_pgvector, monkeypatch):
    assert vector_column_ready()
    # `migrate` in another process: here, its reverse.
    with another_connection(autocommit=True) as other:
        other.execute("ALTER TABLE documents_chunk DROP COLUMN embedding_vector")
    try:
        assert vector_column_ready()  # asked a moment ago
        monkeypatch.setattr(vector_index, "READY_RECHECK_SECONDS", 0.0)
        assert not vector_column_ready()
    finally:
        vector_column_add()
    assert vector_column_ready()


@pytest.mark.slow
def test_a_worker_leaves_the_build_to_another_that_is_building_it(on_pgvector, synonyms, caplog):
    """Two workers write a new model's first chunks at once: the second to commit finds
    the build under way (the other's session lock) and neither waits nor builds twice."""
    name = _drop_index(synonyms.name, synonyms.dimensions)
    org = organisation_create(slug="acme", page_limit=1000)
    with another_connection(autocommit=True) as building:
        building.execute("SELECT pg_advisory_lock(hashtext(%s))", [name])
        with _lock_timeout("2s"), transaction.atomic():  # waiting would be a failure
            document_with_chunks(org, "cars.pdf", ["The automobile was parked outside"])
        assert not vector_index_exists(model=synonyms.name, dimensions=synonyms.dimensions)
        assert "could not be built" not in caplog.text  # it did not wait for the lock
        building.execute("SELECT pg_advisory_unlock(hashtext(%s))", [name])

    with transaction.atomic():
        document_with_chunks(org, "bills.pdf", ["Please pay the invoice"])
    assert vector_index_exists(model=synonyms.name, dimensions=synonyms.dimensions)
