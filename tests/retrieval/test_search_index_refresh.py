"""`manage.py search_index`: an index that a failed concurrent build left invalid is
built again, not passed over by CREATE INDEX ... IF NOT EXISTS."""

import pytest
from django.db import connection

from retrieval.search import documents_search
from retrieval.search_index import INDEX, chunks_search_index_refresh
from tests.support.runs import document_with_chunks

pytestmark = pytest.mark.django_db(transaction=True)  # CONCURRENTLY: no transaction around


def _valid() -> bool | None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = %s",
            [INDEX],
        )
        row = cursor.fetchone()
    return None if row is None else row[0]


def test_an_index_left_invalid_by_a_failed_build_is_built_again(org):
    document_with_chunks(org, "alphabet.pdf", ["an alphabet of the sea"])
    with connection.cursor() as cursor:
        # What a CREATE INDEX CONCURRENTLY that failed half way leaves behind.
        cursor.execute(
            "UPDATE pg_index SET indisvalid = false WHERE indexrelid = %s::regclass", [INDEX]
        )
    assert _valid() is False

    said = chunks_search_index_refresh()

    assert said == "index built again (it was invalid or missing), statistics refreshed"
    assert _valid() is True
    assert [hit.filename for hit in documents_search(organisation=org, query="alphabets").hits] == [
        "alphabet.pdf"
    ]
    assert chunks_search_index_refresh() == "statistics refreshed"


def test_a_missing_index_is_built(org):
    with connection.cursor() as cursor:
        cursor.execute(f'DROP INDEX "{INDEX}"')

    assert chunks_search_index_refresh().startswith("index built again")
    assert _valid() is True
