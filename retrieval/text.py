"""Text candidates: the chunks that hold a query's words, found through their stored
`search_vector` and its GIN index (retrieval/search_index.py), with a text score, and
which of the query's clauses each matching document holds, over all its chunks.

Each clause of the query is looked up on its own: of the organisation's chunks holding
it, at most PER_DOCUMENT of each document and MATCHES_RANKED in all
(each document's first before any one's second), taken from its first _READ_FACTOR
times as many, so a common word cannot crowd a rare one out, nor one long document the
others. How many chunks hold a clause gives its
weight (BM25's idf over the organisation's chunks); `ts_rank` of the chunk's
vector for the clause gives the saturating term frequency, normalised by length; a
chunk holding the words side by side, in the order typed, scores double.
Documents are judged by all their chunks: which clauses a document holds is read again,
for the documents ranked first, where a common clause's chunks were cut short.

The plan does not depend on statistics: each clause's lookup reads the chunks by their
vector alone, in a materialised CTE (planned on its own, run once), so the only ways in
are the GIN index or, where statistics say the word is in most chunks, the table.
Without statistics the planner takes the index; it never reads an organisation's chunks
one document at a time to test each. The price: a clause's matches are read in every
organisation before the organisation's are kept (bounded by the statement timeout).
"""

import math
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection

from documents.models import Chunk, Document
from retrieval.query import Phrase, Query
from retrieval.search_index import check_language
from retrieval.statements import SearchSettings


@dataclass(frozen=True)
class TextMatch:
    chunk_id: object
    document_id: object
    index: int
    # BM25-like: the sum over the clauses the chunk holds of their weight (rarer: more)
    # times a saturating function of how often it holds them; double for the words side
    # by side in the order typed.
    score: float
    clauses: frozenset[int]


@dataclass
class TextCandidates:
    # Best first by score.
    matches: list[TextMatch]
    # The clauses (their positions in the query) each document holds in any chunk.
    holds: dict[object, frozenset[int]] = field(default_factory=dict)
    # The query's clauses an index can look for (a clause of stop words alone cannot).
    clauses: int = 0
    # Those of them (their positions in the query) no chunk of the organisation holds.
    unfound: frozenset[int] = frozenset()


def idf(total: int, found: int) -> float:
    """BM25's weight of a word found in `found` of `total` chunks: rarer words weigh more."""
    total = max(total, found)
    return math.log(1 + (total - found + 0.5) / (found + 0.5))


_CHUNKS = Chunk._meta.db_table
_DOCUMENTS = Document._meta.db_table

# One clause's matching chunks, every organisation's: a CTE is planned alone and run
# once, so the only ways in are the GIN index or the table, never by document.
_MATCHES = f"""
    {{name}} AS MATERIALIZED (
        SELECT id, document_id, version FROM {_CHUNKS}
        WHERE search_vector @@ to_tsquery(%s::regconfig, %s))
"""
# The documents holding an excluded word in any searchable chunk: words are judged over
# the whole document, so a document is left out, not only the chunk holding the word.
# Their chunks are looked up as a clause's are, through the GIN index alone.
_EXCLUDED = f"""
    excluded_matches AS MATERIALIZED (
        SELECT document_id, version FROM {_CHUNKS}
        WHERE search_vector @@ to_tsquery(%s::regconfig, %s)),
    excluded AS MATERIALIZED (
        SELECT DISTINCT x.document_id FROM excluded_matches x
        JOIN {_DOCUMENTS} d ON d.id = x.document_id
        WHERE d.organisation_id = %s AND x.version = d.searchable_version)
"""
_NONE_EXCLUDED = "excluded AS (SELECT NULL::uuid AS document_id WHERE false)"
# Those of the organisation (and the document, when one is searched): how many are read
# (the clause's weight), and the first so many, a few of each document, each document's
# first before any one's second, so one long document cannot fill them and hide others.
_CLAUSE = f"""
    (SELECT {{n}} AS n, id, per_document, in_organisation FROM (
        SELECT id, row_number() OVER (PARTITION BY document_id) AS per_document,
               count(*) OVER () AS in_organisation
        FROM (
            SELECT m.id, m.document_id
            FROM {{name}} m JOIN {_DOCUMENTS} d ON d.id = m.document_id
            WHERE d.organisation_id = %s AND d.deleted_at IS NULL
              AND (%s::uuid IS NULL OR d.id = %s::uuid)
              -- Only the settled version: chunks of a run that has not settled are not found.
              AND m.version = d.searchable_version
              AND NOT EXISTS (SELECT 1 FROM excluded x WHERE x.document_id = m.document_id)
            -- Read so far at most: a common word's every chunk would be read and sorted.
            LIMIT %s) read) s
     WHERE per_document <= %s
     ORDER BY per_document
     LIMIT %s)
"""

# A document's chunks read for a clause: enough for its best chunk to be among them often,
# few enough that the matches read span many documents.
PER_DOCUMENT = 3
# Chunks read for each clause of the query: at most PER_DOCUMENT of each document, and
# this many in all (each document's first before any one's second).
MATCHES_RANKED = 300
# A clause's matches read, in the table's order, to find those of many documents: this
# many times MATCHES_RANKED (a clause in more chunks weighs as in these).
_READ_FACTOR = 10
# Of a clause beside others in more chunks than the matches read, the documents ranked.
_COMMON_SAMPLE = 50


def tsquery_text(alternatives: tuple[Phrase, ...]) -> str:
    """to_tsquery's syntax for a clause: its alternatives or'ed, each a phrase. Words are
    runs of \\w, quoted, so nothing in them is an operator."""
    return " | ".join(
        "(" + " <-> ".join(f"'{word}'" for word in phrase) + ")" for phrase in alternatives
    )


def every_clause(query: Query) -> str:
    """to_tsquery's text for a chunk that holds every clause and no excluded phrase."""
    held = " & ".join(f"({tsquery_text(clause)})" for clause in query.clauses)
    if query.excluded:
        held += f" & !({tsquery_text(query.excluded)})"
    return held


def any_clause(query: Query) -> str:
    """to_tsquery's text for a chunk that holds any clause and no excluded phrase."""
    held = " | ".join(f"({tsquery_text(clause)})" for clause in query.clauses)
    if query.excluded:
        held = f"({held}) & !({tsquery_text(query.excluded)})"
    return held


def passage_counts(*, query: Query, document_ids: list) -> dict[object, int]:
    """For each of `document_ids` (a page of results, already the organisation's), how
    many chunks of its searchable version hold every clause of `query`: the passages a
    search of that document alone would give first."""
    if not document_ids:
        return {}
    language = check_language(settings.PAPERLANE_SEARCH_LANGUAGE)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT c.document_id, count(*)
            FROM {_DOCUMENTS} d
            JOIN {_CHUNKS} c ON c.document_id = d.id AND c.version = d.searchable_version
            WHERE d.id = ANY(%s::uuid[])
              AND c.search_vector @@ to_tsquery(%s::regconfig, %s)
            GROUP BY c.document_id
            """,
            [[str(d) for d in document_ids], language, every_clause(query)],
        )
        return dict(cursor.fetchall())


def text_candidates(
    local: SearchSettings,
    *,
    organisation_id: int,
    query: Query,
    document_id: object | None,
    deepest: int,
) -> TextCandidates:
    """The matches of `query`'s clauses in the organisation's searchable chunks, best
    first; which clauses the `deepest` best documents hold is exact. In the search's
    transaction (`local`, retrieval/statements.py)."""
    language = check_language(settings.PAPERLANE_SEARCH_LANGUAGE)
    per_clause = MATCHES_RANKED
    # A clause's matches are read through the GIN index whatever the statistics say: a
    # sequential scan would unpack every chunk's vector to test it.
    local.set({"enable_seqscan": "off"})
    cursor = local.cursor
    clauses = _answerable(cursor, language, query)
    if not clauses:
        return TextCandidates(matches=[])
    texts = [tsquery_text(query.clauses[n]) for n in clauses]
    # Chunks holding every clause, looked up together (-1): when every word is common,
    # the first matches of each alone need not include them.
    sources = list(enumerate(texts))
    if len(texts) > 1:
        sources.append((-1, " & ".join(f"({text})" for text in texts)))
    if query.excluded:
        matches, params = [_EXCLUDED], [language, tsquery_text(query.excluded), organisation_id]
    else:
        matches, params = [_NONE_EXCLUDED], []
    parts = []
    for n, text in sources:
        matches.append(_MATCHES.format(name=f"m{n}".replace("-", "_")))
        params += [language, text]
    for n, _ in sources:
        parts.append(_CLAUSE.format(n=n, name=f"m{n}".replace("-", "_")))
        params += [organisation_id, document_id, document_id, per_clause * _READ_FACTOR]
        params += [PER_DOCUMENT, per_clause]
    # A word alone: its documents, as many as its matches read, are the results; of a
    # word beside others, a sample (those holding every word are read on their own).
    params += [per_clause, per_clause if len(texts) == 1 else _COMMON_SAMPLE]
    tests = ", ".join(
        "ts_rank(x.v, to_tsquery(%s::regconfig, %s), 0), x.v @@ to_tsquery(%s::regconfig, %s)"
        for _ in texts
    )
    for text in texts:
        params += [language, text, language, text]
    # The words in the order typed, side by side: what a remembered passage looks like.
    params += [language, " ".join(query.words), organisation_id]
    cursor.execute(
        f"""
        WITH {", ".join(matches)},
             pool AS MATERIALIZED ({" UNION ALL ".join(parts)}),
             counted AS MATERIALIZED (
                 SELECT n, id, per_document, in_organisation,
                        count(*) OVER (PARTITION BY n) AS pooled,
                        row_number() OVER (PARTITION BY n ORDER BY per_document) AS k
                 FROM pool),
             -- Of a clause cut short, the first chunk of so many documents is ranked:
             -- its weight is low, and the chunks holding every clause are read on
             -- their own.
             ranked AS (
                 SELECT DISTINCT id FROM counted
                 WHERE n < 0 OR pooled < %s OR (per_document = 1 AND k <= %s))
        SELECT c.id, c.document_id, c.index, length(x.v),
               ARRAY[{tests}]::text[],
               x.v @@ phraseto_tsquery(%s::regconfig, %s),
               (SELECT coalesce(sum(chunk_count), 0) FROM {_DOCUMENTS}
                WHERE organisation_id = %s AND deleted_at IS NULL),
               (SELECT array_agg(DISTINCT ARRAY[n, in_organisation, pooled])
                FROM counted WHERE n >= 0)
        FROM ranked f JOIN {_CHUNKS} c ON c.id = f.id,
             -- The chunk's vector read (decompressed) once for the tests above, not
             -- once for each of them (OFFSET 0: not folded back into each use).
             LATERAL (SELECT c.search_vector || ''::tsvector AS v OFFSET 0) x
        """,
        params,
    )
    rows = cursor.fetchall()
    if not rows:
        return TextCandidates(matches=[], clauses=len(texts), unfound=frozenset(clauses))
    total = rows[0][6]
    found, pooled = [0] * len(texts), [0] * len(texts)
    for n, count, read in rows[0][7] or []:
        found[n], pooled[n] = count, read
    weights = [idf(total, count) for count in found]
    average = sum(row[3] for row in rows) / len(rows) or 1
    matches = []
    for row in rows:
        # (rank, holds) for each clause, as text: "0.0607", "true".
        ranks = [float(value) for value in row[4][0::2]]
        held = frozenset(n for n, value in enumerate(row[4][1::2]) if value == "true")
        # BM25's length normalisation (b = 0.75) of ts_rank's saturating frequency.
        length = 0.25 + 0.75 * row[3] / average
        score = sum(weights[n] * ranks[n] * 10 for n in held) / length
        matches.append(
            TextMatch(
                chunk_id=row[0],
                document_id=row[1],
                index=row[2],
                # ts_rank of one occurrence is 0.1 (times the length's normalisation).
                score=score * (2 if row[5] else 1),
                clauses=held,
            )
        )
    # Equal scores: a document's earlier chunk first, so that a search lands on the
    # same page each time (chunk ids are random).
    matches.sort(key=lambda m: (-m.score, str(m.document_id), m.index))
    holds: dict[object, frozenset[int]] = {}
    for match in matches:
        holds[match.document_id] = holds.get(match.document_id, frozenset()) | match.clauses
    cut_short = [
        n
        for n in range(len(texts))
        if pooled[n] >= per_clause or found[n] >= per_clause * _READ_FACTOR
    ]
    if cut_short:
        # Those already known to hold every clause (the chunks holding every clause
        # read together) have nothing left to learn.
        partial = [d for d in _first_documents(holds, deepest) if len(holds[d]) < len(texts)]
        _complete(cursor, language, texts, cut_short, holds, partial)
    return TextCandidates(
        matches=matches,
        holds=holds,
        clauses=len(texts),
        unfound=frozenset(clauses[n] for n in range(len(texts)) if not found[n]),
    )


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
