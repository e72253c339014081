"""A full-text index on the chunks' text for GET /search: `to_tsvector('simple', text)`,
the expression the search's query repeated word for word (0018 replaced it). Built
concurrently, so uploads and workers go on writing chunks meanwhile."""

from django.db import migrations

from core.migration_indexes import drop_invalid_index

NAME = "documents_chunk_text_search"


def create(apps, schema_editor):
    drop_invalid_index(schema_editor, NAME)
    schema_editor.execute(
        f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{NAME}" ON "documents_chunk" '
        "USING gin (to_tsvector('simple', text))"
    )


def drop(apps, schema_editor):
    schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{NAME}"')


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("documents", "0005_tokens_audit"),
    ]

    operations = [migrations.RunPython(create, drop)]
