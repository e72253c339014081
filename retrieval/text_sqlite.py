"""Text candidates on SQLite (the demo), through the FTS5 table of the chunks' text
(documents/search_index.py) and its bm25 rank: each clause looked up on its own, as on
PostgreSQL, then the chunks found ranked by bm25 for any of the clauses. FTS5's word
statistics are those of the whole table (every organisation's chunks), so a word's
weight is its rarity in the demo's database, not in one organisation."""

import uuid

from django.conf import settings
from django.db import connection

from documents.models import Chunk, Document
from documents.search_index import FTS
from retrieval.query import Phrase, Query
from retrieval.text_candidates import TextCandidates, TextMatch

_CHUNKS = Chunk._meta.db_table
_DOCUMENTS = Document._meta.db_table

_FOUND = f"""
    SELECT {FTS}.rowid, c.id, c.document_id, c."index"{{rank}}
    FROM {FTS} JOIN {_CHUNKS} c ON c.id = {FTS}.chunk_id
    JOIN {_DOCUMENTS} d ON d.id = c.document_id
    WHERE {FTS} MATCH %s AND d.organisation_id = %s AND d.deleted_at IS NULL
      AND (%s IS NULL OR d.id = %s)
      -- Only the settled version: chunks of a run that has not settled are not found.
      AND c.version = d.searchable_version
      {{excluded}}
    {{tail}}
"""
# A document holding an excluded word in any searchable chunk is left out whole: words are
# judged over the whole document.
_EXCLUDED = f"""
    AND c.document_id NOT IN (
        SELECT x.document_id FROM {FTS} JOIN {_CHUNKS} x ON x.id = {FTS}.chunk_id
        JOIN {_DOCUMENTS} xd ON xd.id = x.document_id
        WHERE {FTS} MATCH %s AND x.version = xd.searchable_version)
"""

# A clause's matches read: at most PER_DOCUMENT of each document (its best by bm25) and
# PAPERLANE_SEARCH_MATCHES_RANKED in all, each document's first before any one's second,
# best first, so one long document cannot fill them and hide others (as on PostgreSQL).
_PLACE = (
    f", {FTS}.rank AS rank_of, "
    f"row_number() OVER (PARTITION BY c.document_id ORDER BY {FTS}.rank) AS per_document"
)
_CLAUSE = """
    SELECT * FROM ({found}) WHERE per_document <= %s ORDER BY per_document, rank_of LIMIT %s
"""
PER_DOCUMENT = 3


def fts_text(alternatives: tuple[Phrase, ...]) -> str:
    """FTS5's syntax for a clause: its alternatives or'ed, each a quoted phrase (words are
    runs of \\w, so nothing in them is an operator)."""
    return " OR ".join('"' + " ".join(phrase) + '"' for phrase in alternatives)


def text_candidates(
    *, organisation_id: int, query: Query, document_id: object | None, deepest: int
) -> TextCandidates:
    """The matches of `query`'s clauses in the organisation's searchable chunks, best
    first, and which clauses each document found holds."""
    per_clause = settings.PAPERLANE_SEARCH_MATCHES_RANKED
    excluded = _EXCLUDED if query.excluded else ""
    excluded_params = [" OR ".join(fts_text((p,)) for p in query.excluded)] if excluded else []
    # As the field stores it: 32 hex characters (the raw driver takes no UUID).
    document = Document._meta.pk.get_db_prep_value(document_id, connection)
    clauses_of: dict[int, set[int]] = {}
    rows_of: dict[int, tuple] = {}
    texts = [f"({fts_text(clause)})" for clause in query.clauses]
    with connection.cursor() as cursor:
        for n, text in enumerate(texts):
            cursor.execute(
                _CLAUSE.format(found=_FOUND.format(rank=_PLACE, excluded=excluded, tail="")),
                [text, organisation_id, document, document, *excluded_params]
                + [PER_DOCUMENT, per_clause],
            )
            for row in cursor.fetchall():
                clauses_of.setdefault(row[0], set()).add(n)
                rows_of[row[0]] = row
        if not rows_of:
            return TextCandidates(matches=[], clauses=len(texts))
        # bm25 of the chunks found, for any clause: FTS5 weighs rare words above common ones.
        any_clause = " OR ".join(texts)
        rowids = sorted(rows_of)
        marks = ", ".join("%s" for _ in rowids)
        cursor.execute(
            _FOUND.format(rank=f", bm25({FTS})", excluded="", tail=f"AND {FTS}.rowid IN ({marks})"),
            [any_clause, organisation_id, document, document, *rowids],
        )
        scores = {row[0]: -row[4] for row in cursor.fetchall()}
        # The words side by side in the order typed score double, as on PostgreSQL.
        cursor.execute(
            f"SELECT rowid FROM {FTS} WHERE {FTS} MATCH %s AND rowid IN ({marks})",
            [fts_text((tuple(query.words),)), *rowids],
        )
        for (rowid,) in cursor.fetchall():
            scores[rowid] = scores.get(rowid, 0.0) * 2
    matches = [
        TextMatch(
            chunk_id=uuid.UUID(str(row[1])),
            document_id=uuid.UUID(str(row[2])),
            index=row[3],
            score=scores.get(rowid, 0.0),
            clauses=frozenset(clauses_of[rowid]),
        )
        for rowid, row in rows_of.items()
    ]
    matches.sort(key=lambda m: (-m.score, str(m.chunk_id)))
    holds: dict[object, frozenset[int]] = {}
    for match in matches:
        holds[match.document_id] = holds.get(match.document_id, frozenset()) | match.clauses
    return TextCandidates(matches=matches, holds=holds, clauses=len(texts))
