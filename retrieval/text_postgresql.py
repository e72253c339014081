"""Text candidates on PostgreSQL, through the chunks' stored `search_vector` and its GIN
index (documents/search_index.py).

Each clause of the query is looked up on its own: every chunk of the organisation that
holds a rare word is read, and the first PAPERLANE_SEARCH_MATCHES_RANKED of a common
one, so a common word cannot crowd a rare one out. How many chunks hold a clause gives
its weight (BM25's idf over the organisation's chunks); `ts_rank` of the chunk's
vector for the clause gives the saturating term frequency, normalised by length.
Documents are judged by all their chunks: which clauses a document holds is read again,
for the documents ranked first, where a common clause's chunks were cut short.

The plan does not depend on statistics: each clause's lookup reads the chunks by their
vector alone, in a subquery the planner cannot merge (`OFFSET 0`), so the only ways in
are the GIN index or, where statistics say the word is in most chunks, the table.
Without statistics the planner takes the index; it never reads an organisation's chunks
one document at a time to test each.
"""

from django.conf import settings
from django.db import connection

from documents.models import Chunk, Document
from documents.search_index import check_language
from retrieval.query import Phrase, Query
from retrieval.text_candidates import TextCandidates, TextMatch, idf

_CHUNKS = Chunk._meta.db_table
_DOCUMENTS = Document._meta.db_table

# One clause's matches in the organisation (and the document, when one is searched).
_CLAUSE = f"""
    (SELECT {{n}} AS n, m.id
     FROM (SELECT id, document_id, version FROM {_CHUNKS}
           WHERE search_vector @@ to_tsquery(%s::regconfig, %s) {{excluded}}
           OFFSET 0) m
     JOIN {_DOCUMENTS} d ON d.id = m.document_id
     WHERE d.organisation_id = %s AND d.deleted_at IS NULL
       AND (%s::uuid IS NULL OR d.id = %s::uuid)
       -- Only the settled version: chunks of a run that has not settled are not found.
       AND m.version = d.searchable_version
     LIMIT %s)
"""

_EXCLUDED = "AND NOT search_vector @@ to_tsquery(%s::regconfig, %s)"


def tsquery_text(alternatives: tuple[Phrase, ...]) -> str:
    """to_tsquery's syntax for a clause: its alternatives or'ed, each a phrase. Words are
    runs of \\w, quoted, so nothing in them is an operator."""
    return " | ".join(
        "(" + " <-> ".join(f"'{word}'" for word in phrase) + ")" for phrase in alternatives
    )


def text_candidates(
    *, organisation_id: int, query: Query, document_id: object | None, deepest: int
) -> TextCandidates:
    """The matches of `query`'s clauses in the organisation's searchable chunks, best
    first; which clauses the `deepest` best documents hold is exact."""
    language = check_language(settings.PAPERLANE_SEARCH_LANGUAGE)
    per_clause = settings.PAPERLANE_SEARCH_MATCHES_RANKED
    with connection.cursor() as cursor:
        clauses = _answerable(cursor, language, query)
        if not clauses:
            return TextCandidates(matches=[])
        texts = [tsquery_text(query.clauses[n]) for n in clauses]
        excluded_text = tsquery_text(query.excluded) if query.excluded else ""
        parts, params = [], []
        for position, text in enumerate(texts):
            parts.append(_CLAUSE.format(n=position, excluded=_EXCLUDED if excluded_text else ""))
            params += [language, text]
            params += [language, excluded_text] if excluded_text else []
            params += [organisation_id, document_id, document_id, per_clause]
        ranks = ", ".join(
            "ts_rank(c.search_vector, to_tsquery(%s::regconfig, %s), 1)" for _ in texts
        )
        for text in texts:
            params += [language, text]
        params.append(organisation_id)
        cursor.execute(
            f"""
            WITH pool AS MATERIALIZED ({" UNION ALL ".join(parts)}),
                 found AS (SELECT id, array_agg(n) AS clauses FROM pool GROUP BY id)
            SELECT c.id, c.document_id, c.index, f.clauses, ARRAY[{ranks}],
                   (SELECT coalesce(sum(chunk_count), 0) FROM {_DOCUMENTS}
                    WHERE organisation_id = %s AND deleted_at IS NULL)
            FROM found f JOIN {_CHUNKS} c ON c.id = f.id
            """,
            params,
        )
        rows = cursor.fetchall()
        if not rows:
            return TextCandidates(matches=[], clauses=len(texts))
        total = rows[0][5]
        found = [0] * len(texts)
        for row in rows:
            for n in row[3]:
                found[n] += 1
        weights = [idf(total, count) for count in found]
        matches = [
            TextMatch(
                chunk_id=row[0],
                document_id=row[1],
                index=row[2],
                # ts_rank of one occurrence is 0.1 (times the length's normalisation).
                score=sum(weights[n] * row[4][n] * 10 for n in row[3]),
                clauses=frozenset(row[3]),
            )
            for row in rows
        ]
        matches.sort(key=lambda m: (-m.score, str(m.chunk_id), m.index))
        holds: dict[object, frozenset[int]] = {}
        for match in matches:
            holds[match.document_id] = holds.get(match.document_id, frozenset()) | match.clauses
        cut_short = [n for n, count in enumerate(found) if count >= per_clause]
        if cut_short:
            _complete(cursor, language, texts, cut_short, holds, _first_documents(holds, deepest))
    return TextCandidates(matches=matches, holds=holds, clauses=len(texts))


def _answerable(cursor, language: str, query: Query) -> list[int]:
    """The clauses the index can look for: not those of stop words alone ("the")."""
    texts = [tsquery_text(clause) for clause in query.clauses]
    cursor.execute(
        "SELECT numnode(to_tsquery(%s::regconfig, t)) FROM unnest(%s::text[]) t",
        [language, texts],
    )
    return [n for n, (nodes,) in enumerate(cursor.fetchall()) if nodes]


def _first_documents(holds: dict[object, frozenset[int]], deepest: int) -> list[object]:
    ordered = sorted(holds, key=lambda d: -len(holds[d]))
    return ordered[:deepest]


def _complete(cursor, language, texts, cut_short, holds, documents) -> None:
    """Which of the cut-short clauses `documents` hold in any of their searchable chunks
    (their chunks read by document, a bounded number of documents)."""
    if not documents:
        return
    tests = ", ".join(
        "bool_or(c.search_vector @@ to_tsquery(%s::regconfig, %s))" for _ in cut_short
    )
    params = [p for n in cut_short for p in (language, texts[n])]
    cursor.execute(
        f"""
        SELECT c.document_id, ARRAY[{tests}]
        FROM {_CHUNKS} c JOIN {_DOCUMENTS} d
          ON d.id = c.document_id AND c.version = d.searchable_version
        WHERE c.document_id = ANY(%s::uuid[])
        GROUP BY c.document_id
        """,
        [*params, [str(d) for d in documents]],
    )
    for document, held in cursor.fetchall():
        extra = {n for n, yes in zip(cut_short, held, strict=True) if yes}
        holds[document] = holds[document] | extra
