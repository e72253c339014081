"""Search by stemmed words: a stored `search_vector` column in PAPERLANE_SEARCH_LANGUAGE
with a GIN index (retrieval/search_index.py keeps them fit since), replacing the index on
`to_tsvector('simple', text)` (0006). Adding the column rewrites the chunks table
(PostgreSQL holds it locked meanwhile); the index is then built concurrently. The SQL is
written here as it was when this migration was made."""

from django.conf import settings
from django.db import migrations

from core.migration_indexes import drop_invalid_index

OLD_INDEX = "documents_chunk_text_search"
INDEX = "documents_chunk_search"
# Apostrophes removed, hyphens read as spaces, in the chunks' text as in queries.
NORMALISED = (
    "replace(replace(replace(replace(replace(replace(text, '''', ''), '\u2019', ''), "
    "'\u02bc', ''), '-', ' '), '\u2010', ' '), '\u2011', ' ')"
)


def create(apps, schema_editor):
    language = settings.PAPERLANE_SEARCH_LANGUAGE
    if not language or not language.replace("_", "").isalnum():
        raise ValueError(f"PAPERLANE_SEARCH_LANGUAGE {language!r} is not a configuration name")
    schema_editor.execute(
        'ALTER TABLE "documents_chunk" ADD COLUMN IF NOT EXISTS "search_vector" tsvector '
        f"GENERATED ALWAYS AS (to_tsvector('{language}'::regconfig, {NORMALISED})) STORED"
    )
    drop_invalid_index(schema_editor, INDEX)
    schema_editor.execute(
        f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{INDEX}" ON "documents_chunk" '
        'USING gin ("search_vector")'
    )
    schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{OLD_INDEX}"')


def drop(apps, schema_editor):
    schema_editor.execute(
        f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{OLD_INDEX}" ON "documents_chunk" '
        "USING gin (to_tsvector('simple', text))"
    )
    schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{INDEX}"')
    schema_editor.execute('ALTER TABLE "documents_chunk" DROP COLUMN IF EXISTS "search_vector"')


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("documents", "0017_chunk_embedding_vector"),
    ]

    operations = [migrations.RunPython(create, drop)]
