"""Search by stemmed words (documents/search_index.py): on PostgreSQL a stored
`search_vector` column in PAPERLANE_SEARCH_LANGUAGE with a GIN index, replacing the
index on `to_tsvector('simple', text)` (0006); on SQLite an FTS5 table kept in step by
triggers. Adding the column rewrites the chunks table (PostgreSQL holds it locked
meanwhile); the index is then built concurrently."""

from django.conf import settings
from django.db import migrations

from core.migration_indexes import drop_invalid_index
from documents import search_index

OLD_INDEX = "documents_chunk_text_search"


def create(apps, schema_editor):
    language = settings.PAPERLANE_SEARCH_LANGUAGE
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(search_index.postgresql_add_column(language))
        drop_invalid_index(schema_editor, search_index.INDEX)
        schema_editor.execute(search_index.postgresql_create_index())
        schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{OLD_INDEX}"')
    elif schema_editor.connection.vendor == "sqlite":
        for statement in search_index.sqlite_create_statements(language):
            schema_editor.execute(statement)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{OLD_INDEX}" ON "documents_chunk" '
            "USING gin (to_tsvector('simple', text))"
        )
        schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{search_index.INDEX}"')
        schema_editor.execute(search_index.postgresql_drop_column())
    elif schema_editor.connection.vendor == "sqlite":
        for statement in search_index.sqlite_drop_statements():
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("documents", "0017_chunk_embedding_vector"),
    ]

    operations = [migrations.RunPython(create, drop)]
