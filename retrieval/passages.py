"""Every passage of one document that holds a query's words, and how many passages each
document found across documents holds.

A search across documents gives each document once, with its best chunk
(retrieval/search.py). Within one document a person wants every place the words are:
`document_passages` gives each chunk of the document's searchable version that holds
every clause of the query (or, where none holds them all, any of them), in page order or
best first, a page of them at a time. The chunks are one document's, read through its
own rows (a 5,000-page document has some 10,000), each tested against the query; no
organisation-wide lookup. (How many passages each document of a search across documents
holds: retrieval.text.passage_counts.)
"""

from dataclasses import dataclass

from django.conf import settings

from documents.models import Chunk, Document, Organisation
from retrieval.search import (
    Hit,
    Results,
    marked_snippet,
    page_bounds,
    query_parsed,
    query_suggestion,
    with_landing_pages,
    within_search_time,
)
from retrieval.search_index import check_language
from retrieval.text import any_clause, every_clause, tsquery_text

# The orders a document's passages come in.
PAGE_ORDER = "page"
RANK_ORDER = "rank"
ORDERS = (PAGE_ORDER, RANK_ORDER)

_CHUNKS = Chunk._meta.db_table
_DOCUMENTS = Document._meta.db_table


@dataclass(frozen=True)
class Passages(Results):
    # How many passages hold the words in all (every page of them).
    total: int = 0
    # False when no passage holds every clause and these hold some of them.
    every_word: bool = True


def document_passages(
    *,
    organisation: Organisation,
    document_id: object,
    query: str,
    order: str = PAGE_ORDER,
    limit: int = 10,
    offset: int = 0,
) -> Passages:
    """The passages (chunks) of the organisation's document `document_id` that hold
    `query`'s words, `limit` of them after the first `offset`, in page order or best
    first (`order`). Those holding every clause; where none does, those holding any."""
    parsed = query_parsed(query)
    if not parsed.clauses:
        return Passages(hits=[], ranking="text", total=0)
    limit, offset = page_bounds(limit, offset)
    if order not in ORDERS:
        order = PAGE_ORDER
    language = check_language(settings.PAPERLANE_SEARCH_LANGUAGE)

    order_by = "ts_rank(c.search_vector, q) DESC, c.index" if order == RANK_ORDER else "c.index"

    def passages(cursor, tsquery: str, offset: int, limit: int) -> list[tuple]:
        cursor.execute(
            f"""
            SELECT c.id, c.index, c.text, c.page_start, c.page_end, c.section,
                   (SELECT count(*) FROM unnest(%s::text[]) AS clause(t)
                    WHERE c.search_vector @@ to_tsquery(%s::regconfig, clause.t)),
                   count(*) OVER (), d.filename, d.page_count
            FROM {_DOCUMENTS} d
            JOIN {_CHUNKS} c ON c.document_id = d.id AND c.version = d.searchable_version,
                 to_tsquery(%s::regconfig, %s) q
            WHERE d.id = %s AND d.organisation_id = %s AND d.deleted_at IS NULL
              AND c.search_vector @@ q
            ORDER BY {order_by}
            LIMIT %s OFFSET %s
            """,
            [clauses, language, language, tsquery, document_id, organisation.id, limit, offset],
        )
        return cursor.fetchall()

    # Each clause on its own, to count those a passage holds (its score).
    clauses = [tsquery_text(clause) for clause in parsed.clauses]

    def read(local) -> tuple[list[tuple], bool]:
        cursor = local.cursor
        every = every_clause(parsed)
        rows = passages(cursor, every, offset, limit + 1)
        if rows or len(parsed.clauses) == 1:
            return rows, True
        if offset and passages(cursor, every, 0, 1):
            return rows, True  # past the last of those holding every clause
        return passages(cursor, any_clause(parsed), offset, limit + 1), False

    rows, every = within_search_time(read)
    hits = []
    for row in rows[:limit]:
        piece, marks = marked_snippet(row[2], parsed.words)
        hits.append(
            Hit(
                document_id=document_id,
                filename=row[8],
                pages=row[9],
                chunk_index=row[1],
                snippet=piece,
                # A passage's words: the share of the query's clauses it holds.
                score=round(row[6] / len(clauses), 4),
                page_start=row[3],
                page_end=row[4],
                section=row[5],
                marks=marks,
            )
        )
    return Passages(
        hits=with_landing_pages(hits),
        ranking="text",
        more=len(rows) > limit,
        total=rows[0][7] if rows else 0,
        every_word=every,
        suggestion=None
        if rows or offset
        else query_suggestion(organisation.id, query, parsed.words),
    )
