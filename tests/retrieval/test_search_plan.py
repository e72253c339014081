"""The search's query reads the chunks through their GIN index whatever the table's
statistics say: here on a freshly loaded table that was never analysed."""

import io

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from retrieval.search import documents_search
from retrieval.search_index import INDEX
from tests.support.runs import document_with_chunks

pytestmark = pytest.mark.django_db


def _load(organisation, documents: int, chunks: int) -> None:
    """Chunks written in bulk, as a large import leaves them: no ANALYZE after."""
    for n in range(documents):
        document = document_with_chunks(organisation, f"{n}.pdf", [f"opening of {n}"])
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO documents_chunk (id, document_id, version, index, text, embedding, "
                "embedding_model, section, created_at) "
                "SELECT gen_random_uuid(), %s, %s, i, "
                "'the survey of the coast, page ' || i || ' of document ' || %s || "
                "repeat(' with the usual words of a report', 20), '', 'm', '', now() "
                "FROM generate_series(1, %s) i",
                [document.id, document.version, n, chunks],
            )


def _plan(sql: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_the_search_uses_the_text_index_on_a_table_never_analysed(org, other_org):
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE documents_chunk SET (autovacuum_enabled = false)")
        # Statistics an earlier test's data left would not be those of this table's rows.
        cursor.execute("DELETE FROM pg_statistic WHERE starelid = 'documents_chunk'::regclass")
    _load(org, documents=30, chunks=200)
    _load(other_org, documents=10, chunks=200)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stats WHERE tablename = 'documents_chunk'")
        assert cursor.fetchone()[0] == 0

    with CaptureQueriesContext(connection) as queries:
        results = documents_search(organisation=org, query="opening 7", limit=5)

    assert results.hits and results.hits[0].filename == "7.pdf"
    [pool] = [q["sql"] for q in queries.captured_queries if "pool AS" in q["sql"]]
    plan = _plan(pool)
    # "opening", "7", and both together; without the search's own enable_seqscan = off.
    assert plan.count(f"Bitmap Index Scan on {INDEX}") == 3, plan
    assert "Seq Scan on documents_chunk" not in plan, plan


@pytest.mark.django_db(transaction=True)  # the index is built concurrently: no transaction
def test_search_index_rebuilds_the_index_in_a_new_language_and_analyses(org, settings):
    with connection.cursor() as cursor:
        # Rows an earlier test wrote and rolled back leave their entries in the pending list.
        cursor.execute("SELECT gin_clean_pending_list(%s::regclass)", [INDEX])
    document_with_chunks(org, "alphabet.pdf", ["an alphabet of the sea"])
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM pg_statistic WHERE starelid = 'documents_chunk'::regclass")
    # The chunk just written waits in the index's pending list until merged.
    assert call_command_output("search_index") == (
        "pending list merged into the index (1 pages), statistics refreshed"
    )
    assert call_command_output("search_index") == "statistics refreshed"
    try:
        settings.PAPERLANE_SEARCH_LANGUAGE = "simple"
        assert call_command_output("search_index") == (
            "index rebuilt in simple (was english), statistics refreshed"
        )
        assert _found(org, "alphabet") == ["alphabet.pdf"]
        assert _found(org, "alphabets") == []  # no stemmer in `simple`
    finally:
        settings.PAPERLANE_SEARCH_LANGUAGE = "english"
        call_command_output("search_index")
    assert _found(org, "alphabets") == ["alphabet.pdf"]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stats "
            "WHERE tablename = 'documents_chunk' AND attname = 'search_vector'"
        )
        assert cursor.fetchone()[0] == 1


def _found(organisation, query: str) -> list[str]:
    return [h.filename for h in documents_search(organisation=organisation, query=query).hits]


def call_command_output(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().strip()
