"""Search an organisation's documents: candidate chunks found by their words, ranked by
their embeddings.

On PostgreSQL the full-text index on the chunks' text (`to_tsvector('simple', text)`,
migration documents 0006) finds the chunks that hold every word of the query, in
`websearch_to_tsquery` syntax ("a quoted phrase", `or`, `-word`), and keeps the
PAPERLANE_SEARCH_CANDIDATES best by text rank, within PAPERLANE_SEARCH_TIMEOUT_MS. On
SQLite (the demo) the candidates are the chunks that contain every word. The candidates
are then ranked by their text rank fused with the cosine similarity of their embedding
and the query's, embedded by the provider that embedded the chunks; each document
appears once, with its best chunk. If the provider cannot embed the query (down, or
its breaker open), the text rank alone orders the results, and the answer says so.
Only a document's searchable version is read (`Document.searchable_version`, set when
its run settles): chunks of a run still in the pipeline, or of one that did not settle,
are never found.

Candidates come from words: with the default hashing embedder, whose vectors are made
of words and word pairs, a chunk without a word of the query scores about zero anyway.
A semantic provider could rank chunks that share no word with the query; finding those
needs a vector index (pgvector), which the portable float32 embeddings do not have.
"""

import logging
import operator
import re
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.db.utils import OperationalError

from core.errors import RetryLater, ServiceError
from core.provider_breaker import breaker
from documents.models import Chunk, Document, Organisation
from retrieval.chunking import clean_text
from retrieval.embedding import PROVIDER, get_embedder, unpack_vector

logger = logging.getLogger(__name__)

# 300 characters, each of up to 4 bytes percent-encoded as 12, stay within the 4094 bytes
# gunicorn takes in a request line (its default --limit-request-line).
MAX_QUERY_CHARS = 300
MAX_LIMIT = 50
# Results are paged up to this many documents deep.
MAX_OFFSET = 200
# A search that ran out of time may be sent again after this.
SEARCH_RETRY_AFTER_SECONDS = 5
# Characters of a chunk shown around the first word of the query it holds.
SNIPPET_CHARS = 240
# Over the query and a snippet (SNIPPET_CHARS at most), never a document's whole text.
_WORD = re.compile(r"\w+")
# Reciprocal rank fusion's constant: 60, as in its paper and most search engines.
_FUSION_K = 60


class SearchTooSlow(RetryLater):
    """The search ran out of its time: a narrower one, or the same once the database is
    less busy, may not."""

    status_code = 503
    code = "search_timeout"


@dataclass(frozen=True)
class Hit:
    document_id: object
    filename: str
    pages: int | None
    chunk_index: int
    snippet: str
    score: float
    # The pages the chunk comes from (1-based), None where the format has no pages.
    page_start: int | None = None
    page_end: int | None = None
    # The section the chunk starts in, "" where the document has none.
    section: str = ""
    # Where the snippet holds the query's words: (start, end) offsets into `snippet`.
    marks: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Results:
    hits: list[Hit]
    # "embedding" when the query's embedding ranked them, "text" when the provider could not.
    ranking: str
    # Whether more documents match beyond these (the next page starts at offset + limit).
    more: bool = False


@dataclass(frozen=True)
class _Candidate:
    document_id: object
    index: int
    text: str
    embedding: bytes
    model: str
    page_start: int | None = None
    page_end: int | None = None
    section: str = ""


def documents_search(
    *,
    organisation: Organisation,
    query: str,
    limit: int = 10,
    offset: int = 0,
    document_id: object | None = None,
) -> Results:
    """The organisation's documents that best match `query`, best first: at most `limit`
    of them after the first `offset`. With `document_id`, that document alone (its best
    chunk), if it is the organisation's and matches."""
    query = query.strip()
    if len(query) > MAX_QUERY_CHARS:
        raise ServiceError(
            f"A search is at most {MAX_QUERY_CHARS} characters.", code="query_too_long"
        )
    words, unwanted = _terms(query)
    if not words:
        raise ServiceError(
            "Send the words to search for in `q` (a search of only -words finds nothing).",
            code="query_empty",
        )
    limit = min(max(limit, 1), MAX_LIMIT)
    offset = min(max(offset, 0), MAX_OFFSET)
    if connection.vendor == "postgresql":
        candidates = _candidates_postgresql(organisation.id, query, document_id)
    else:
        candidates = _candidates_by_substring(organisation.id, words, unwanted, document_id)
    vector = _query_vector(" ".join(words))  # without the syntax: quotes, or, -words
    ranked = _rank(candidates, vector)
    best: dict[object, tuple[float, _Candidate]] = {}
    for score, candidate in ranked:
        best.setdefault(candidate.document_id, (score, candidate))
        if len(best) > offset + limit:
            break
    more = len(best) > offset + limit
    page = list(best.items())[offset : offset + limit]
    documents = Document.objects.only("filename", "page_count").in_bulk([d for d, _ in page])
    hits = []
    for found_id, (score, candidate) in page:
        if found_id not in documents:
            continue
        text, marks = marked_snippet(candidate.text, words)
        hits.append(
            Hit(
                document_id=found_id,
                filename=documents[found_id].filename,
                pages=documents[found_id].page_count,
                chunk_index=candidate.index,
                snippet=text,
                score=round(score, 4),
                page_start=candidate.page_start,
                page_end=candidate.page_end,
                section=candidate.section,
                marks=marks,
            )
        )
    return Results(hits=hits, ranking="text" if vector is None else "embedding", more=more)


# The expression must be the index's (documents 0006), word for word, for the planner to use it.
CANDIDATES_SQL = f"""
    SELECT m.document_id, m.index, m.text, m.embedding, m.embedding_model,
           m.page_start, m.page_end, m.section
    FROM (
        SELECT c.document_id, c.index, c.text, c.embedding, c.embedding_model,
               c.page_start, c.page_end, c.section, q.q
        FROM {Chunk._meta.db_table} c
        JOIN {Document._meta.db_table} d ON d.id = c.document_id,
             websearch_to_tsquery('simple', %s) q(q)
        WHERE d.organisation_id = %s AND d.deleted_at IS NULL
          AND (%s::uuid IS NULL OR d.id = %s::uuid)
          -- Only the settled version: chunks of a run that has not settled are not found.
          AND c.version = d.searchable_version
          AND to_tsvector('simple', c.text) @@ q.q
          -- A query the index cannot answer (only -words: every chunk but some) finds nothing.
          AND querytree(q.q) NOT IN ('T', '')
        -- Ranking reads each match's text again: a word in every chunk must not mean
        -- ranking them all, so at most this many matches are ranked.
        LIMIT %s
    ) m
    ORDER BY ts_rank_cd(to_tsvector('simple', m.text), m.q) DESC
    LIMIT %s
"""


def _candidates_postgresql(
    organisation_id: int, query: str, document_id: object | None
) -> list[_Candidate]:
    timeout_ms = settings.PAPERLANE_SEARCH_TIMEOUT_MS
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT set_config('statement_timeout', %s, true)", [str(timeout_ms)])
            cursor.execute(
                CANDIDATES_SQL,
                [
                    query,
                    organisation_id,
                    document_id,
                    document_id,
                    settings.PAPERLANE_SEARCH_MATCHES_RANKED,
                    settings.PAPERLANE_SEARCH_CANDIDATES,
                ],
            )
            rows = cursor.fetchall()
    except OperationalError as exc:
        if getattr(exc.__cause__, "sqlstate", None) != "57014":  # query_canceled
            raise
        raise SearchTooSlow(
            f"The search took longer than {timeout_ms / 1000:g} s. Add words, or put a phrase "
            'in "quotes", to narrow it.',
            retry_after=SEARCH_RETRY_AFTER_SECONDS,
        ) from None
    return [_Candidate(row[0], row[1], row[2], bytes(row[3]), *row[4:]) for row in rows]


def _candidates_by_substring(
    organisation_id: int, words: list[str], unwanted: list[str], document_id: object | None
) -> list[_Candidate]:
    chunks = Chunk.objects.filter(
        document__organisation_id=organisation_id,
        document__deleted_at__isnull=True,
        version=F("document__searchable_version"),
    )
    if document_id is not None:
        chunks = chunks.filter(document_id=document_id)
    for word in dict.fromkeys(words):
        chunks = chunks.filter(text__icontains=word)
    for word in dict.fromkeys(unwanted):
        chunks = chunks.exclude(text__icontains=word)
    rows = chunks.order_by("-document__created_at", "index").values_list(
        "document_id",
        "index",
        "text",
        "embedding",
        "embedding_model",
        "page_start",
        "page_end",
        "section",
    )
    candidates = [
        _Candidate(row[0], row[1], row[2], bytes(row[3]), *row[4:])
        for row in rows[: settings.PAPERLANE_SEARCH_CANDIDATES]
    ]
    # PostgreSQL's text rank, roughly: how often the words occur (a plain count, no pattern).
    return sorted(candidates, key=lambda c: -sum(c.text.lower().count(w) for w in words))


def _terms(query: str) -> tuple[list[str], list[str]]:
    """The query's words to find and its -words, lower case: for the snippet and SQLite
    (PostgreSQL reads the whole syntax itself). `or` is an operator, not a word; a phrase
    in quotes counts as its words."""
    words: list[str] = []
    unwanted: list[str] = []
    for token in query.split():
        if token.lower() == "or":
            continue
        found = [word.lower() for word in _WORD.findall(token)]
        (unwanted if token.startswith("-") else words).extend(found)
    return words, unwanted


def _query_vector(query: str) -> tuple[str, list[float]] | None:
    """The query's embedding and the model that made it; None if the provider cannot."""
    provider = breaker(PROVIDER)
    if provider.paused_for() > 0:
        return None
    embedder = get_embedder()
    try:
        [vector] = embedder.embed([clean_text(query)])
    except Exception as exc:  # whatever a provider raises: the words still find and rank
        logger.warning("search: the embedding provider failed, ranking by text: %s", exc)
        return None
    return embedder.name, vector


def _rank(
    candidates: list[_Candidate], query: tuple[str, list[float]] | None
) -> list[tuple[float, _Candidate]]:
    """(score, candidate), best first: the candidates' order by text, fused with their
    order by cosine similarity to the query's embedding (reciprocal rank fusion), scaled
    so that first by both is 1. A chunk embedded by another model, or every chunk when the
    query has no embedding, is ranked by its text alone.

    Fusing the two orders rather than trusting the cosine alone: a hashed embedding of a
    long chunk is noisy (its words share dimensions), and a chunk that holds the query's
    words densely should not fall behind one whose collisions happen to line up."""
    by_vector: dict[int, int] = {}
    if query is not None:
        model, vector = query
        similarity = [
            (_cosine(candidate.embedding, vector), position)
            for position, candidate in enumerate(candidates)
            if candidate.model == model
        ]
        similarity.sort(key=lambda item: item[0], reverse=True)
        by_vector = {position: rank for rank, (_, position) in enumerate(similarity, start=1)}
    best = 2 / (_FUSION_K + 1) if query is not None else 1 / (_FUSION_K + 1)
    scored = []
    for position, candidate in enumerate(candidates):
        fused = 1 / (_FUSION_K + position + 1)
        if position in by_vector:
            fused += 1 / (_FUSION_K + by_vector[position])
        scored.append((fused / best, position, candidate))
    scored.sort(key=lambda item: (-item[0], item[1]))
    return [(score, candidate) for score, _, candidate in scored]


def _cosine(embedding: bytes, vector: list[float]) -> float:
    values = unpack_vector(embedding)
    if len(values) != len(vector):
        return 0.0
    norms = _norm(values) * _norm(vector)
    return sum(map(operator.mul, values, vector)) / norms if norms else 0.0


def _norm(vector) -> float:
    return sum(x * x for x in vector) ** 0.5


def snippet(text: str, words: list[str]) -> str:
    """About SNIPPET_CHARS of `text` around the first of `words` it holds (plain find,
    no pattern over the document's text), whitespace collapsed, cut at spaces."""
    lowered = text.lower()
    found = [at for at in (lowered.find(word) for word in words) if at >= 0]
    first = min(found) if found else 0
    start = max(0, first - SNIPPET_CHARS // 3)
    end = min(len(text), start + SNIPPET_CHARS)
    if start > 0:
        space = text.find(" ", start, first)
        start = space + 1 if space >= 0 else start
    if end < len(text):
        space = text.rfind(" ", max(first, start), end)
        end = space if space > first else end
    piece = " ".join(text[start:end].split())
    return ("…" if start > 0 else "") + piece + ("…" if end < len(text) else "")


def marked_snippet(text: str, words: list[str]) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The snippet of `text` for `words`, and where it holds each of them: (start, end)
    offsets of every whole word of the snippet that is one of `words` (case aside)."""
    piece = snippet(text, words)
    wanted = set(words)
    marks = tuple(
        (found.start(), found.end())
        for found in _WORD.finditer(piece)
        if found.group().lower() in wanted
    )
    return piece, marks
