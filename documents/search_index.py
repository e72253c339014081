"""The chunks' full-text index for search (retrieval/search.py), its DDL on each database.

PostgreSQL: a stored `search_vector` column generated from the chunk's normalised text
in the text search configuration PAPERLANE_SEARCH_LANGUAGE, with a GIN index on it.
SQLite (the demo): an FTS5 table of the normalised text and the chunk's id, kept in
step with documents_chunk by triggers, with Porter's stemmer for `english`.

A stored vector rather than an index on the expression alone: ranking reads each
candidate's vector, and computing it again costs about 0.1 ms a chunk (the 5,000
matches of a common word: half a second).
"""

# Apostrophes are removed ("keeper's" is "keepers" to the stemmer) and hyphens read as
# spaces ("e-mail" is "e mail"), in the chunks' text here and in queries (retrieval/query.py).
APOSTROPHES = "'\u2019\u02bc"
HYPHENS = "-\u2010\u2011"

CHUNKS = "documents_chunk"
COLUMN = "search_vector"
INDEX = "documents_chunk_search"
FTS = "documents_chunk_fts"
FTS_ROWS = "documents_chunk_fts_rows"
# FTS5 has Porter's stemmer (English) and none for other languages.
_SQLITE_TOKENIZERS = {
    "english": "porter unicode61 remove_diacritics 2",
    "simple": "unicode61 remove_diacritics 2",
}


def normalise_sql(column: str) -> str:
    """The normalisation of apostrophes and hyphens as SQL (PostgreSQL and SQLite alike)."""
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


def postgresql_vector_expression(language: str) -> str:
    return f"to_tsvector('{check_language(language)}'::regconfig, {normalise_sql('text')})"


def postgresql_add_column(language: str) -> str:
    return (
        f'ALTER TABLE "{CHUNKS}" ADD COLUMN IF NOT EXISTS "{COLUMN}" tsvector '
        f"GENERATED ALWAYS AS ({postgresql_vector_expression(language)}) STORED"
    )


def postgresql_drop_column() -> str:
    return f'ALTER TABLE "{CHUNKS}" DROP COLUMN IF EXISTS "{COLUMN}"'


def postgresql_create_index() -> str:
    return f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{INDEX}" ON "{CHUNKS}" USING gin ("{COLUMN}")'


def postgresql_column_language(cursor) -> str | None:
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


def sqlite_create_statements(language: str) -> list[str]:
    """Create the FTS5 table and its triggers, and index the chunks already there. A row
    holds its chunk's id: documents_chunk's rowid is not stable (a VACUUM, or a migration
    remaking the table, renumbers it). FTS_ROWS maps a chunk's id to its FTS5 row, so a
    chunk's row is removed by its rowid (FTS5 has no index on an unindexed column)."""
    tokenizer = _SQLITE_TOKENIZERS.get(check_language(language), _SQLITE_TOKENIZERS["simple"])
    return [
        f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS} USING "
        f"fts5(text, chunk_id UNINDEXED, tokenize='{tokenizer}')",
        f"CREATE TABLE IF NOT EXISTS {FTS_ROWS} (chunk_id TEXT PRIMARY KEY, fts_rowid INTEGER)",
        *sqlite_trigger_statements(),
        f"DELETE FROM {FTS}",
        f"DELETE FROM {FTS_ROWS}",
        f"INSERT INTO {FTS}(text, chunk_id) SELECT {normalise_sql('text')}, id FROM {CHUNKS}",
        f"INSERT INTO {FTS_ROWS}(chunk_id, fts_rowid) SELECT chunk_id, rowid FROM {FTS}",
    ]


def sqlite_trigger_statements() -> list[str]:
    """The triggers keeping the FTS5 table in step with documents_chunk (a migration that
    remakes the table drops them: `manage.py search_index` puts them back)."""
    new = normalise_sql("new.text")
    insert = (
        f"INSERT INTO {FTS}(text, chunk_id) VALUES ({new}, new.id); "
        f"INSERT INTO {FTS_ROWS}(chunk_id, fts_rowid) VALUES (new.id, last_insert_rowid()); "
    )
    delete = (
        f"DELETE FROM {FTS} WHERE rowid = "
        f"(SELECT fts_rowid FROM {FTS_ROWS} WHERE chunk_id = old.id); "
        f"DELETE FROM {FTS_ROWS} WHERE chunk_id = old.id; "
    )
    return [
        f"CREATE TRIGGER IF NOT EXISTS {FTS}_insert AFTER INSERT ON {CHUNKS} BEGIN {insert}END",
        f"CREATE TRIGGER IF NOT EXISTS {FTS}_delete AFTER DELETE ON {CHUNKS} BEGIN {delete}END",
        f"CREATE TRIGGER IF NOT EXISTS {FTS}_update AFTER UPDATE OF text, id ON {CHUNKS} "
        f"BEGIN {delete}{insert}END",
    ]


def sqlite_index_intact(cursor) -> bool:
    """Whether the FTS5 table (with its chunk ids), its rows' map and its three triggers
    are there."""
    cursor.execute(
        "SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s "
        "AND name IN (%s, %s, %s)",
        [CHUNKS, f"{FTS}_insert", f"{FTS}_delete", f"{FTS}_update"],
    )
    if cursor.fetchone()[0] != 3:
        return False
    cursor.execute("SELECT count(*) FROM sqlite_master WHERE name = %s", [FTS_ROWS])
    if cursor.fetchone()[0] != 1:
        return False
    cursor.execute("SELECT name FROM pragma_table_info(%s)", [FTS])
    return "chunk_id" in {row[0] for row in cursor.fetchall()}


def sqlite_drop_statements() -> list[str]:
    return [
        f"DROP TRIGGER IF EXISTS {FTS}_insert",
        f"DROP TRIGGER IF EXISTS {FTS}_delete",
        f"DROP TRIGGER IF EXISTS {FTS}_update",
        f"DROP TABLE IF EXISTS {FTS}",
        f"DROP TABLE IF EXISTS {FTS_ROWS}",
    ]
