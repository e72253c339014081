"""A full-text index on the chunks' text for GET /search (retrieval/search.py), PostgreSQL
only: `to_tsvector('simple', text)`, the expression the search's query repeats word for
word. Built concurrently, so uploads and workers go on writing chunks meanwhile. SQLite
(the demo) has no such index; its search matches substrings."""

from django.db import migrations

from core.migration_indexes import drop_invalid_index

NAME = "documents_chunk_text_search"


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        drop_invalid_index(schema_editor, NAME)
        schema_editor.execute(
            f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{NAME}" ON "documents_chunk" '
            "USING gin (to_tsvector('simple', text))"
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{NAME}"')


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("documents", "0005_tokens_audit"),
    ]

    operations = [migrations.RunPython(create, drop)]
