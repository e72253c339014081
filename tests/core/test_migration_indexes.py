"""Concurrent index builds in migrations: one that failed half way is built again."""

import pytest
from django.db import connection
from django.db.utils import IntegrityError

from core.migration_indexes import drop_invalid_index

pytestmark = pytest.mark.django_db(transaction=True)  # CONCURRENTLY: no transaction around


def _index_valid(name: str):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = %s",
            [name],
        )
        row = cursor.fetchone()
    return None if row is None else row[0]


def test_an_index_whose_concurrent_build_failed_is_dropped_and_a_valid_one_kept():
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE half_built (n int)")
        cursor.execute("INSERT INTO half_built VALUES (1), (1)")
        cursor.execute("CREATE INDEX CONCURRENTLY kept_whole ON half_built (n)")
        with pytest.raises(IntegrityError):  # the duplicate fails the build half way
            cursor.execute("CREATE UNIQUE INDEX CONCURRENTLY left_invalid ON half_built (n)")
    try:
        assert (_index_valid("left_invalid"), _index_valid("kept_whole")) == (False, True)

        with connection.schema_editor(atomic=False) as editor:
            drop_invalid_index(editor, "left_invalid")
            drop_invalid_index(editor, "kept_whole")

        assert (_index_valid("left_invalid"), _index_valid("kept_whole")) == (None, True)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE half_built")
