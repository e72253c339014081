"""Chinese, Japanese and Korean found by a part of a phrase: each chunk holding their
characters gets `search_text`, its text with those runs as their pairs of characters
(core/cjk.py), and the stored `search_vector` is generated from it where it is set. The
column is generated again (PostgreSQL rewrites the chunks table, holding it locked), then
its index is built concurrently; search finds nothing in between. The SQL is written here
as it was when this migration was made."""

from django.conf import settings
from django.db import migrations, models

from core.migration_indexes import drop_invalid_index

INDEX = "documents_chunk_search"
NORMALISED = (
    "replace(replace(replace(replace(replace(replace(coalesce(search_text, text), '''', ''), "
    "'\u2019', ''), '\u02bc', ''), '-', ' '), '\u2010', ' '), '\u2011', ' ')"
)
# Hiragana, katakana, CJK ideographs, Hangul syllables, half-width katakana.
CJK = "[\\u3040-\\u30ff\\u3400-\\u4dbf\\u4e00-\\u9fff\\uac00-\\ud7af\\uf900-\\ufaff\\uff66-\\uff9f]"
BATCH = 1000


def bigrams(apps, schema_editor):
    from core.cjk import with_bigrams

    Chunk = apps.get_model("documents", "Chunk")
    after = None
    while True:
        chunks = Chunk.objects.extra(where=["text ~ %s"], params=[CJK]).order_by("id")
        if after is not None:
            chunks = chunks.filter(id__gt=after)
        batch = list(chunks.only("id", "text")[:BATCH])
        if not batch:
            return
        for chunk in batch:
            chunk.search_text = with_bigrams(chunk.text)
        Chunk.objects.bulk_update(batch, ["search_text"])
        after = batch[-1].id


def generate(apps, schema_editor):
    language = settings.PAPERLANE_SEARCH_LANGUAGE
    if not language or not language.replace("_", "").isalnum():
        raise ValueError(f"PAPERLANE_SEARCH_LANGUAGE {language!r} is not a configuration name")
    schema_editor.execute('ALTER TABLE "documents_chunk" DROP COLUMN IF EXISTS "search_vector"')
    schema_editor.execute(
        'ALTER TABLE "documents_chunk" ADD COLUMN "search_vector" tsvector '
        f"GENERATED ALWAYS AS (to_tsvector('{language}'::regconfig, {NORMALISED})) STORED"
    )
    drop_invalid_index(schema_editor, INDEX)
    schema_editor.execute(
        f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{INDEX}" ON "documents_chunk" '
        'USING gin ("search_vector")'
    )


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("documents", "0022_search_words"),
    ]

    operations = [
        migrations.AddField(
            model_name="chunk",
            name="search_text",
            field=models.TextField(blank=True, null=True),
        ),
        migrations.RunPython(bigrams, migrations.RunPython.noop),
        migrations.RunPython(generate, migrations.RunPython.noop),
    ]
