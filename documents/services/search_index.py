"""Keeping the chunks' full-text index (documents/search_index.py) fit: built in the
configured language, and with statistics after a bulk load."""

from django.conf import settings
from django.db import connection

from documents import search_index


def chunks_search_index_refresh(*, rebuild: bool = False) -> str:
    """Rebuild the index if it is in another language than PAPERLANE_SEARCH_LANGUAGE (or
    when asked), then refresh the planner's statistics of the chunks (ANALYZE): a bulk
    load leaves none until autovacuum comes by. Says what it did. Outside a transaction:
    the index is built concurrently. On SQLite, rebuilds the FTS5 table if it or its
    triggers are missing."""
    language = search_index.check_language(settings.PAPERLANE_SEARCH_LANGUAGE)
    done = []
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            built = search_index.postgresql_column_language(cursor)
            if rebuild or built != language:
                # The column is generated: dropping it drops its index; adding it rewrites
                # the table in the new language (locked meanwhile), then the index is built.
                cursor.execute(search_index.postgresql_drop_column())
                cursor.execute(search_index.postgresql_add_column(language))
                cursor.execute(search_index.postgresql_create_index())
                done.append(f"index rebuilt in {language} (was {built or 'missing'})")
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
