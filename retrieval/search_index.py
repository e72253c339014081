"""The chunks' full-text index for search (retrieval/text.py): its DDL, and keeping it fit.

A stored `search_vector` column of documents_chunk, generated from the chunk's normalised
text (its `search_text` where it holds Chinese, Japanese or Korean: core/cjk.py) in the
text search configuration PAPERLANE_SEARCH_LANGUAGE, with a GIN index on it (made by
migrations documents 0018 and 0023, which keep their own copies of this SQL as it was
then).
`chunks_search_index_refresh` rebuilds it in another language and refreshes the planner's
statistics after a bulk load (`manage.py search_index`).

A stored vector rather than an index on the expression alone: ranking reads each
candidate's vector, and computing it again costs about 0.1 ms a chunk (the 5,000
matches of a common word: half a second).
"""

from django.conf import settings
from django.db import connection

from core.migration_indexes import drop_invalid_index

# Apostrophes are removed ("keeper's" is "keepers" to the stemmer) and hyphens read as
# spaces ("e-mail" is "e mail"), in the chunks' text here and in queries (retrieval/query.py).
APOSTROPHES = "'\u2019\u02bc"
HYPHENS = "-\u2010\u2011"

CHUNKS = "documents_chunk"
COLUMN = "search_vector"
INDEX = "documents_chunk_search"


def normalise_sql(column: str) -> str:
    """The normalisation of apostrophes and hyphens as SQL."""
    expression = column
    for apostrophe in APOSTROPHES:
        quoted = "''''" if apostrophe == "'" else f"'{apostrophe}'"
        expression = f"replace({expression}, {quoted}, '')"
    for hyphen in HYPHENS:
        expression = f"replace({expression}, '{hyphen}', ' ')"
    return expression


def check_language(language: str) -> str:
    if not language or not language.replace("_", "").isalnum():
        raise ValueError(f"PAPERLANE_SEARCH_LANGUAGE {language!r} is not a configuration name")
    return language


def vector_expression(language: str) -> str:
    # The chunk's text, or where it holds Chinese, Japanese or Korean, its text with those
    # runs as pairs of characters (`search_text`, core/cjk.py).
    text = normalise_sql("coalesce(search_text, text)")
    return f"to_tsvector('{check_language(language)}'::regconfig, {text})"


def add_column(language: str) -> str:
    return (
        f'ALTER TABLE "{CHUNKS}" ADD COLUMN IF NOT EXISTS "{COLUMN}" tsvector '
        f"GENERATED ALWAYS AS ({vector_expression(language)}) STORED"
    )


def drop_column() -> str:
    return f'ALTER TABLE "{CHUNKS}" DROP COLUMN IF EXISTS "{COLUMN}"'


def create_index() -> str:
    return f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{INDEX}" ON "{CHUNKS}" USING gin ("{COLUMN}")'


def column_language(cursor) -> str | None:
    """The configuration the column was generated with, None if there is no column."""
    cursor.execute(
        "SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d "
        "JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum "
        "WHERE d.adrelid = %s::regclass AND a.attname = %s",
        [CHUNKS, COLUMN],
    )
    row = cursor.fetchone()
    if row is None:
        return None
    # "to_tsvector('english'::regconfig, ...": the name between the first quotes.
    expression = row[0]
    start = expression.find("'") + 1
    return expression[start : expression.find("'", start)]


def _index_valid() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = %s",
            [INDEX],
        )
        row = cursor.fetchone()
    return row is not None and bool(row[0])


def _index_build() -> None:
    """CREATE INDEX CONCURRENTLY, after dropping what a failed build left under its name."""
    with connection.schema_editor(atomic=False) as editor:
        drop_invalid_index(editor, INDEX)
    with connection.cursor() as cursor:
        cursor.execute(create_index())


def chunks_search_index_refresh(*, rebuild: bool = False) -> str:
    """Rebuild the index if it is in another language than PAPERLANE_SEARCH_LANGUAGE (or
    when asked), then merge what waits in its pending list and refresh the planner's
    statistics of the chunks (ANALYZE): a bulk load leaves both until autovacuum comes
    by. An index left invalid or missing by a build
    that failed is built again. Says what it did. Outside a transaction: the index is built
    concurrently, and search finds nothing during a rebuild."""
    language = check_language(settings.PAPERLANE_SEARCH_LANGUAGE)
    done = []
    with connection.cursor() as cursor:
        built = column_language(cursor)
        if rebuild or built != language:
            # The column is generated: dropping it drops its index; adding it rewrites the
            # table in the new language (locked meanwhile), then the index is built.
            # Search waits (then is refused) during the rewrite, and scans until the build ends.
            cursor.execute(drop_column())
            cursor.execute(add_column(language))
            _index_build()
            done.append(f"index rebuilt in {language} (was {built or 'missing'})")
        elif not _index_valid():
            # An earlier build that failed half way (or was interrupted) left the index
            # invalid or missing; IF NOT EXISTS alone would pass over an invalid one.
            _index_build()
            done.append("index built again (it was invalid or missing)")
        # Rows written since the index last merged them wait in its pending list, which
        # every search reads through (autovacuum merges it; a bulk load outruns it).
        cursor.execute("SELECT gin_clean_pending_list(%s::regclass)", [INDEX])
        (merged,) = cursor.fetchone()
        if merged:
            done.append(f"pending list merged into the index ({merged} pages)")
        cursor.execute(f'ANALYZE "{CHUNKS}"')
        done.append("statistics refreshed")
    return ", ".join(done)
