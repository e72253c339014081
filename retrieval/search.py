"""Search an organisation's documents for what a person types.

The words find the candidates (retrieval/text.py, through the chunks' stemmed full-text
index), in web-search syntax: "a quoted phrase", `a or b`, `-word`. Documents that hold
every word (in any of their chunks) come first; when fewer than `limit` do, those that
hold the most of them follow. Within that, chunks are ordered by a BM25-like text score
(rare words count more), fused (reciprocal rank fusion) with their order by the query
embedding's cosine similarity when the embedder's vectors have a meaning; each document
appears once, with its best chunk, chosen after ranking over a pool in which no single
document can take every place.

The default embedder hashes words into dimensions: its vectors have no meaning, and
fusing their order made search worse (bench/search.py --embeddings: MRR@10 of 6
consecutive words 0.969 fused against 1.000; the known-item test measures both), so by
default its cosine does not rank (PAPERLANE_SEARCH_FUSE_EMBEDDINGS). When it does, the
chunks nearest the query's embedding (retrieval/vectors.py: pgvector's HNSW index, or an
exact scan up to a bound) join the candidates, so a document that shares no word with
the query is found by its meaning, after those that hold some of the words.

If the provider cannot embed the query (down, or its breaker open), the text rank alone
orders the results, and the answer says so. Only a document's searchable version is
read (`Document.searchable_version`, set when its run settles): chunks of a run still in
the pipeline, or of one that did not settle, are never found.
"""

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from django.conf import settings
from django.db import connection
from django.db.utils import OperationalError

from core import cjk
from core.errors import RetryLater, ServiceError
from core.provider_breaker import breaker
from documents.models import FLOAT32_BYTES, Chunk, Document, DocumentText, Organisation
from retrieval.chunking import clean_text
from retrieval.coverage import embedding_coverage
from retrieval.embedding import PROVIDER, get_embedder
from retrieval.query import Query, parse
from retrieval.query_vectors import query_vector_keep, query_vector_kept
from retrieval.search_index import check_language
from retrieval.statements import is_cancelled, search_transaction
from retrieval.suggest import nearest_words, rewritten
from retrieval.text import TextCandidates, TextMatch, passage_counts, text_candidates
from retrieval.vectors import cosine_similarities, nearest_chunks

logger = logging.getLogger(__name__)

# 300 characters, each of up to 4 bytes percent-encoded as 12, stay within the 4094 bytes
# gunicorn takes in a request line (its default --limit-request-line).
MAX_QUERY_CHARS = 300
MAX_LIMIT = 50
# Results are paged up to this many documents deep.
MAX_OFFSET = 200
# A chunk found by meaning alone must reach this share of the nearest chunk's similarity
# as well as the model's floor (bench/meaning.py: with the floor, precision 0.923 and
# recall 0.994 on its labelled set; 0.6 and more lose the documents that only touch on
# a subject).
MEANING_RELATIVE = 0.5
# A search that ran out of time may be sent again after this.
SEARCH_RETRY_AFTER_SECONDS = 5
# Characters of a chunk shown around the first word of the query it holds.
SNIPPET_CHARS = 240
# Over the query and a snippet (SNIPPET_CHARS at most), never a document's whole text.
_WORD = re.compile(r"\w+")
# Reciprocal rank fusion's constant: 60, as in its paper and most search engines.
_FUSION_K = 60
# The best chunks by text that are then ranked with the query's embedding (when the
# embedder's vectors have a meaning) and cut to one per document.
CANDIDATES = 200
# A document's chunks in the pool that is ranked with the embedding: so that the pool of
# CANDIDATES holds at least a third as many documents.
_CHUNKS_PER_DOCUMENT = 3
# The chunks nearest the query's embedding that join the candidates (bench/vectors.py: an
# HNSW search for 50 of 100,000 chunks, p95 28 ms).
_NEIGHBOURS = 50


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
    # How many of the document's passages (chunks) hold every word: a search of this
    # document alone (retrieval/passages.py) gives each of them. 0 when none holds them
    # all (the document holds some of the words, or holds them apart).
    passages: int = 0
    # The page that holds the snippet's first marked word (a chunk may span pages):
    # where a link to the result opens the document. None where the format has no pages.
    page: int | None = None


@dataclass(frozen=True)
class Results:
    hits: list[Hit]
    # "embedding" when the query's embedding ranked them, "text" when the text alone did.
    ranking: str
    # Whether more documents match beyond these (the next page starts at offset + limit).
    more: bool = False
    # Whether the chunks nearest the query's embedding joined the candidates found by the
    # words: not when its embedding does not rank, nor beyond the exact scan's bound with
    # no vector index (PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS).
    neighbours: bool = False
    # While a re-embed is under way (a chunk found is on another model): the share of the
    # organisation's searchable chunks on the current model, the only ones compared.
    model_share: float | None = None
    # Whether embeddings were to rank but the provider could not embed the query.
    embedding_unavailable: bool = False
    # The query with the words no document holds replaced by the nearest that some do
    # ("Did you mean"); None when every word is held or none is near.
    suggestion: str | None = None


def documents_search(
    *,
    organisation: Organisation,
    query: str,
    limit: int = 10,
    offset: int = 0,
    document_id: object | None = None,
) -> Results:
    """The organisation's documents that best match `query`, best first: at most `limit`
    of them after the first `offset`. Documents holding every word come first, then
    those holding the most of them. With `document_id`, that document alone (its best
    chunk), if it is the organisation's and matches."""
    parsed = query_parsed(query)
    if not parsed.clauses:
        return Results(hits=[], ranking="text")
    limit, offset = page_bounds(limit, offset)
    found = _text_candidates(organisation.id, parsed, document_id, deepest=offset + limit + 1)
    by_text = _text_order(found)
    pool = _pool(by_text)
    fuse = _fuse_embeddings()
    vector = _query_vector(" ".join(parsed.words)) if fuse else None
    meaning = Meaning(order=[], similarity={}, floor=_meaning_floor())
    neighbours, model_share = False, None
    if vector is not None:
        nearest = _nearest(organisation.id, vector, document_id)
        neighbours = nearest.complete or bool(nearest.rows)
        meaning = _by_meaning(nearest, pool, vector)
        if meaning.mixed:
            model_share = round(embedding_coverage(organisation=organisation).share, 4)
    semantic = meaning.order
    fused = _rank([m.chunk_id for m in by_text], [m.chunk_id for m in semantic])
    best: dict[object, tuple[float, TextMatch]] = {}
    for match in [*by_text, *semantic]:
        score = fused[match.chunk_id]
        if match.document_id not in best or score > best[match.document_id][0]:
            best[match.document_id] = (score, match)

    def order(document):
        held = len(found.holds.get(document, ()))
        return (held == found.clauses, held, best[document][0])

    ranked = sorted(best, key=order, reverse=True)
    more = len(ranked) > offset + limit
    page = ranked[offset : offset + limit]
    counts = within_search_time(lambda _: passage_counts(query=parsed, document_ids=page))
    unfound = [w for n in sorted(found.unfound) for phrase in parsed.clauses[n] for w in phrase]
    strongest = max((m.score for m in by_text), default=0.0)
    scores = {
        document: match_score(
            clauses=found.clauses,
            document_holds=len(found.holds.get(document, ())),
            passage_holds=len(best[document][1].clauses),
            strength=best[document][1].score / strongest if strongest else 0.0,
            similarity=meaning.similarity.get(best[document][1].chunk_id),
            floor=meaning.floor,
        )
        for document in page
    }
    return Results(
        hits=_hits(page, best, scores, parsed, counts),
        ranking="embedding" if semantic else "text",
        more=more,
        neighbours=neighbours,
        model_share=model_share,
        embedding_unavailable=fuse and vector is None,
        suggestion=query_suggestion(organisation.id, query, unfound),
    )


def query_parsed(query: str) -> Query:
    """What a person typed, read (retrieval/query.py); ServiceError for a query too long.
    A query of only -words (or `or`) has no clause: it finds nothing."""
    query = query.strip()
    if len(query) > MAX_QUERY_CHARS:
        raise ServiceError(
            f"A search is at most {MAX_QUERY_CHARS} characters.", code="query_too_long"
        )
    return parse(query)


def query_suggestion(organisation_id: int, query: str, words: list[str]) -> str | None:
    """`query` with those of `words` the organisation's documents do not hold replaced
    by the nearest they do (retrieval/suggest.py); None when none is replaced."""
    if not words:
        return None
    replacements = within_search_time(
        lambda local: nearest_words(local.cursor, organisation_id=organisation_id, words=words)
    )
    return rewritten(query.strip(), replacements) if replacements else None


def page_bounds(limit: int, offset: int) -> tuple[int, int]:
    """`limit` and `offset` within what a search answers (MAX_LIMIT, MAX_OFFSET)."""
    return min(max(limit, 1), MAX_LIMIT), min(max(offset, 0), MAX_OFFSET)


def within_search_time(read):
    """`read(local)`'s answer, its statements run on `local.cursor` as a search's
    (retrieval/statements.py: held to PAPERLANE_SEARCH_TIMEOUT_MS, each planned for its
    own words): SearchTooSlow past the time."""
    timeout_ms = settings.PAPERLANE_SEARCH_TIMEOUT_MS
    try:
        with search_transaction() as local:
            return read(local)
    except OperationalError as exc:
        if not is_cancelled(exc):
            raise
        raise SearchTooSlow(
            f"The search took longer than {timeout_ms / 1000:g} s. Add words, or put a phrase "
            'in "quotes", to narrow it.',
            retry_after=SEARCH_RETRY_AFTER_SECONDS,
        ) from None


def _text_candidates(organisation_id, parsed: Query, document_id, *, deepest: int):
    return within_search_time(
        lambda local: text_candidates(
            local,
            organisation_id=organisation_id,
            query=parsed,
            document_id=document_id,
            deepest=deepest,
        )
    )


def _text_order(found: TextCandidates) -> list[TextMatch]:
    """The matches best first by text: chunks of documents that hold every clause, then
    of those that hold the most; within each, chunks holding more of them themselves,
    then by text score."""

    def held(match: TextMatch) -> int:
        return len(found.holds.get(match.document_id, ()))

    return sorted(
        found.matches,
        key=lambda m: (held(m) != found.clauses, -held(m), -len(m.clauses), -m.score),
    )


def _pool(by_text: list[TextMatch]) -> list[TextMatch]:
    """The first CANDIDATES matches by text, at most a few of each
    document: those whose embeddings are compared with the query's."""
    taken: dict[object, int] = {}
    pool = []
    for match in by_text:
        if taken.get(match.document_id, 0) >= _CHUNKS_PER_DOCUMENT:
            continue
        taken[match.document_id] = taken.get(match.document_id, 0) + 1
        pool.append(match)
        if len(pool) >= CANDIDATES:
            break
    return pool


def _rank(text: Sequence[object], semantic: Sequence[object]) -> dict[object, float]:
    """Each chunk's score: reciprocal rank fusion of its place in the text order and in
    the semantic order (`_by_meaning`), scaled so that first in both is 1. A chunk in one
    order only has its share of that one; with no semantic order, the text's alone."""
    best = (2 if semantic else 1) / (_FUSION_K + 1)
    scores: dict[object, float] = {}
    for order in (text, semantic):
        for rank, key in enumerate(order, start=1):
            scores[key] = scores.get(key, 0.0) + 1 / (_FUSION_K + rank) / best
    return scores


def _fuse_embeddings() -> bool:
    """Whether the query embedding's cosine ranks: by PAPERLANE_SEARCH_FUSE_EMBEDDINGS,
    and with `auto` when the embedder's vectors have a meaning (an embedder says it has
    none with `has_meaning = False`; the hashing one has none)."""
    setting = settings.PAPERLANE_SEARCH_FUSE_EMBEDDINGS
    if setting != "auto":
        return setting == "always"
    return getattr(get_embedder(), "has_meaning", True)


def _query_vector(query: str) -> tuple[str, list[float]] | None:
    """The query's embedding and the model that made it; None if the provider cannot
    give it within PAPERLANE_SEARCH_EMBED_BUDGET_MS, or its breaker says not to ask. The
    same query within query_vectors.KEEP_SECONDS is answered from Redis
    without a call; a failure or a timeout counts into the breaker the embed workers
    share (core/provider_breaker.py)."""
    embedder = get_embedder()
    text = clean_text(query)
    kept = query_vector_kept(embedder.name, text)
    if kept is not None:
        return embedder.name, kept
    provider = breaker(PROVIDER)
    if provider.searches_skip():
        return None
    budget = settings.PAPERLANE_SEARCH_EMBED_BUDGET_MS / 1000
    try:
        [vector] = embedder.embed([text], max_seconds=budget)
    except Exception as exc:  # whatever a provider raises: the words still find and rank
        provider.failed(in_request=True)
        logger.warning("search: the embedding provider failed, ranking by text: %s", exc)
        return None
    provider.succeeded(in_request=True)
    query_vector_keep(embedder.name, text, vector)
    return embedder.name, vector


def _nearest(organisation_id, query: tuple[str, list[float]], document_id):
    model, vector = query
    return nearest_chunks(
        organisation_id=organisation_id,
        model=model,
        vector=vector,
        limit=_NEIGHBOURS,
        document_id=document_id,
    )


@dataclass(frozen=True)
class Meaning:
    # The semantic order: the chunks nearest the query's embedding above the floor, then
    # the text candidates' chunks by their cosine.
    order: list[TextMatch]
    # Chunk -> its cosine similarity to the query, for every chunk compared.
    similarity: dict[object, float]
    # The model's floor (PAPERLANE_EMBED_MIN_SIMILARITY, or the embedder's own).
    floor: float
    # Whether a text candidate's chunk is on another model (a re-embed under way).
    mixed: bool = False


def _meaning_floor() -> float:
    """The current model's similarity floor: the embedder's own `min_similarity`, or the
    setting."""
    declared = getattr(get_embedder(), "min_similarity", None)
    return settings.PAPERLANE_EMBED_MIN_SIMILARITY if declared is None else declared


def _by_meaning(nearest, pool: list[TextMatch], query: tuple[str, list[float]]) -> Meaning:
    """The semantic order: the chunks nearest the query's embedding (found by the vector
    index or the exact scan, words or none) whose similarity reaches the model's floor
    and MEANING_RELATIVE of the nearest one's, then the pool's other
    chunks of the query's model by their cosine (farther than those, when the
    neighbours are complete). A neighbour below the floor is no candidate: a query that
    means nothing the documents hold finds nothing by meaning."""
    floor = _meaning_floor()
    top = max((row.similarity for row in nearest.rows), default=0.0)
    least = max(floor, top * MEANING_RELATIVE)
    similarity = {row.chunk_id: row.similarity for row in nearest.rows}
    order = [
        TextMatch(
            chunk_id=row.chunk_id,
            document_id=row.document_id,
            index=row.index,
            score=0.0,
            clauses=frozenset(),  # found by meaning: it may hold no word of the query
        )
        for row in nearest.rows
        if row.similarity >= least
    ]
    near = {match.chunk_id for match in order}
    model, vector = query
    rows = Chunk.objects.filter(id__in=[m.chunk_id for m in pool]).values_list(
        "id", "embedding", "embedding_model"
    )
    by_id = {m.chunk_id: m for m in pool}
    position = {m.chunk_id: n for n, m in enumerate(pool)}
    compared = [
        (key, bytes(embedding))
        for key, embedding, chunk_model in rows
        if chunk_model == model and key not in near
    ]
    scores = _cosines([embedding for _, embedding in compared], vector)
    similarity.update(zip((key for key, _ in compared), scores, strict=True))
    by_cosine = sorted(
        zip(scores, (key for key, _ in compared), strict=True),
        key=lambda item: (-item[0], position[item[1]]),
    )
    return Meaning(
        order=order + [by_id[key] for _, key in by_cosine],
        similarity=similarity,
        floor=floor,
        mixed=any(chunk_model != model for _, _, chunk_model in rows),
    )


def match_score(
    *,
    clauses: int,
    document_holds: int,
    passage_holds: int,
    strength: float,
    similarity: float | None,
    floor: float,
) -> float:
    """How well a result matches, from 0 to 1: the better of its words and its meaning.
    Words: four fifths the share of the query's clauses its document holds, one fifth
    the share its passage holds itself times the passage's text score against the best
    passage's (`strength`, 0 to 1): 1 for the passage that holds every word best.
    Meaning: the passage's cosine similarity to the query from the model's floor (0) to
    1, when the query's embedding ranked."""
    words = 0.0
    if clauses:
        words = 0.8 * document_holds / clauses + 0.2 * strength * passage_holds / clauses
    meaning = 0.0
    if similarity is not None and floor < 1:
        meaning = min(max((similarity - floor) / (1 - floor), 0.0), 1.0)
    return round(max(words, meaning), 4)


def _cosines(embeddings: list[bytes], vector: list[float]) -> list[float]:
    """The cosine similarity of each float32 embedding with `vector` (0 for one of other
    dimensions)."""
    size = FLOAT32_BYTES * len(vector)
    fitting = [n for n, embedding in enumerate(embeddings) if len(embedding) == size]
    scores = [0.0] * len(embeddings)
    if fitting:
        data = b"".join(embeddings[n] for n in fitting)
        for n, value in zip(fitting, cosine_similarities(data, vector).tolist(), strict=True):
            scores[n] = value
    return scores


def _hits(page: list, best: dict, scores: dict, parsed: Query, counts: dict) -> list[Hit]:
    chunks = {
        c.id: c
        for c in Chunk.objects.filter(id__in=[best[d][1].chunk_id for d in page]).only(
            "id", "text", "page_start", "page_end", "section"
        )
    }
    documents = Document.objects.only("filename", "page_count").in_bulk(page)
    words = parsed.words
    pieces = {d: snippet(chunks[best[d][1].chunk_id].text, words) for d in page if d in documents}
    marks = _marks(list(pieces.values()), words)
    hits = []
    for document, piece in pieces.items():
        match = best[document][1]
        chunk = chunks[match.chunk_id]
        hits.append(
            Hit(
                document_id=document,
                filename=documents[document].filename,
                pages=documents[document].page_count,
                chunk_index=match.index,
                snippet=piece,
                score=scores[document],
                page_start=chunk.page_start,
                page_end=chunk.page_end,
                section=chunk.section,
                marks=marks[piece],
                passages=counts.get(document, 0),
            )
        )
    return with_landing_pages(hits)


def with_landing_pages(hits: list[Hit]) -> list[Hit]:
    """`hits`, each with the page that holds its snippet's first marked word (`page`):
    the chunk's own page when it spans one; else the first of its pages whose text holds
    that word, read from the document's searchable text, a few pages' slices, in one
    statement for them all (its first page when none is found)."""
    spanning = [
        hit for hit in hits if hit.page_start is not None and hit.page_end != hit.page_start
    ]
    found: dict[tuple, int] = {}
    if spanning:
        words = [_first_marked(hit) for hit in spanning]

        def read(local) -> dict[tuple, int]:
            cursor = local.cursor
            cursor.execute(
                f"""
                SELECT h.n, p.page
                FROM unnest(%s::int[], %s::uuid[], %s::int[], %s::int[], %s::text[])
                     AS h(n, document_id, first, last, word)
                JOIN {Document._meta.db_table} d ON d.id = h.document_id
                JOIN {DocumentText._meta.db_table} t
                  ON t.document_id = d.id AND t.version = d.searchable_version
                CROSS JOIN LATERAL (
                    SELECT page FROM generate_series(h.first, h.last) page
                    WHERE h.word <> '' AND strpos(lower(substr(
                        t.text,
                        (t.page_starts ->> (page - 1))::int + 1,
                        coalesce((t.page_starts ->> page)::int, length(t.text))
                            - (t.page_starts ->> (page - 1))::int
                    )), lower(h.word)) > 0
                    ORDER BY page LIMIT 1) p
                """,
                [
                    list(range(len(spanning))),
                    [str(hit.document_id) for hit in spanning],
                    [hit.page_start for hit in spanning],
                    [hit.page_end for hit in spanning],
                    words,
                ],
            )
            return {(spanning[n].document_id, spanning[n].chunk_index): p for n, p in cursor}

        found = within_search_time(read)
    return [
        replace(hit, page=found.get((hit.document_id, hit.chunk_index), hit.page_start))
        for hit in hits
    ]


def _first_marked(hit: Hit) -> str:
    if not hit.marks:
        return ""
    start, end = min(hit.marks)
    return hit.snippet[start:end]


def _marks(pieces: list[str], words: list[str]) -> dict[str, tuple[tuple[int, int], ...]]:
    """Where each snippet holds a word of the query, as the index would match it: a word
    whose stem is a query word's stem ("alphabet" for "alphabets"), and in Chinese,
    Japanese or Korean, the query's characters wherever they are (core/cjk.py)."""
    found = {
        piece: [(m.start(), m.end(), m.group().lower()) for m in cjk.OTHER_WORD.finditer(piece)]
        for piece in pieces
    }
    every = sorted({w for spots in found.values() for _, _, w in spots} | set(words))
    stems = _stems(every)
    wanted = {stems[w] for w in words if stems.get(w)}
    return {
        piece: tuple(
            sorted(
                [(start, end) for start, end, w in spots if stems.get(w) in wanted]
                + cjk.spans(piece, words)
            )
        )
        for piece, spots in found.items()
    }


def _stems(words: list[str]) -> dict[str, str]:
    """Each word's stem as the index has it (the search language's configuration). A stop
    word has none."""
    if not words:
        return {}
    language = check_language(settings.PAPERLANE_SEARCH_LANGUAGE)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT w, (SELECT min(lexeme) FROM unnest(to_tsvector(%s::regconfig, w))) "
            "FROM unnest(%s::text[]) w",
            [language, words],
        )
        return {word: stem for word, stem in cursor.fetchall() if stem}


def _rough_stem(word: str) -> str:
    # For finding where a snippet starts only: the marks are the index's own stems.
    for ending in ("ing", "ed", "es", "s"):
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            return word[: -len(ending)]
    return word


def snippet(text: str, words: list[str]) -> str:
    """About SNIPPET_CHARS of `text` around the first of `words` (or of their rough stems:
    "alphabet" for "alphabets") it holds, by plain find, no pattern over the document's
    text; whitespace collapsed, cut at spaces."""
    looked_for = dict.fromkeys([*words, *(_rough_stem(word) for word in words)])
    lowered, origin = _lowered(text)
    found = [lowered.find(word) for word in looked_for]
    found = [at if origin is None else origin[at] for at in found if at >= 0]
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


def _lowered(text: str) -> tuple[str, list[int] | None]:
    """`text` lowered, and where each of its characters came from in `text` when lowering
    changed its length ("İ" is two characters lowered); None when the offsets are `text`'s."""
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered, None
    # Lowered character by character: each offset of the joined copy maps back to its own.
    origin = [at for at, char in enumerate(text) for _ in char.lower()]
    return "".join(char.lower() for char in text), origin


def marked_snippet(text: str, words: list[str]) -> tuple[str, tuple[tuple[int, int], ...]]:
    """The snippet of `text` for `words`, and where it holds them: (start, end) offsets
    of every whole word of the snippet whose stem is one of theirs."""
    piece = snippet(text, words)
    return piece, _marks([piece], words)[piece]
