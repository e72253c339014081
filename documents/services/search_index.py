"""Keeping the chunks' full-text index (documents/search_index.py) fit: built in the
configured language, and with statistics after a bulk load."""

from django.conf import settings
from django.db import connection

from core.migration_indexes import drop_invalid_index
from documents import search_index


def _index_valid() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = %s",
            [search_index.INDEX],
        )
        row = cursor.fetchone()
    return row is not None and bool(row[0])


def _index_build() -> None:
    """CREATE INDEX CONCURRENTLY, after dropping what a failed build left under its name."""
    with connection.schema_editor(atomic=False) as editor:
        drop_invalid_index(editor, search_index.INDEX)
    with connection.cursor() as cursor:
        cursor.execute(search_index.postgresql_create_index())


def chunks_search_index_refresh(*, rebuild: bool = False) -> str:
    """Rebuild the index if it is in another language than PAPERLANE_SEARCH_LANGUAGE (or
    when asked), then refresh the planner's statistics of the chunks (ANALYZE): a bulk
    load leaves none until autovacuum comes by. An index left invalid or missing by a build
    that failed is built again. Says what it did. Outside a transaction: the index is built
    concurrently, and search finds nothing during a rebuild. On SQLite, rebuilds the FTS5
    table if it or its triggers are missing."""
    language = search_index.check_language(settings.PAPERLANE_SEARCH_LANGUAGE)
    done = []
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            built = search_index.postgresql_column_language(cursor)
            if rebuild or built != language:
                # The column is generated: dropping it drops its index; adding it rewrites
                # the table in the new language (locked meanwhile), then the index is built.
                # Search waits (then is refused) during the rewrite, and scans until the build ends.
                cursor.execute(search_index.postgresql_drop_column())
                cursor.execute(search_index.postgresql_add_column(language))
                _index_build()
                done.append(f"index rebuilt in {language} (was {built or 'missing'})")
            elif not _index_valid():
                # An earlier build that failed half way (or was interrupted) left the index
                # invalid or missing; IF NOT EXISTS alone would pass over an invalid one.
                _index_build()
                done.append("index built again (it was invalid or missing)")
            cursor.execute(f'ANALYZE "{search_index.CHUNKS}"')
            done.append("statistics refreshed")
        elif rebuild or not search_index.sqlite_index_intact(cursor):
            # A migration remaking documents_chunk drops the triggers: the table is then
            # behind, and rebuilt whole.
            for statement in search_index.sqlite_drop_statements():
                cursor.execute(statement)
            for statement in search_index.sqlite_create_statements(language):
                cursor.execute(statement)
            done.append(f"index rebuilt in {language}")
    return ", ".join(done) or "nothing to do"
