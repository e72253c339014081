"""Search by meaning on a labelled set: the similarity floor's precision and recall, the
scores' margin, and what a query costs, with a provider whose vectors carry meaning.

    .venv/bin/python bench/meaning.py [--provider-url URL --model M --dimensions N
                                       [--key-env VAR]] [--repeat 5]

The set (tests/support/concepts.py): a document per concept, sixteen, eight more that
only touch on one, and 134 queries
that share no word with the documents they should find: 80 single words, 16 pairs of
words of one concept, 8 queries of two concepts (two targets each), and 30 of nonsense
that should find nothing. By default the model is the concept model of that module,
served on loopback by its ConceptServer and called through the HTTP provider, as a
production deployment calls a hosted model.

With `--provider-url` it runs the same set against any OpenAI-compatible provider (its
base URL or its /embeddings endpoint, the key read from the variable `--key-env` names):
that is how to calibrate PAPERLANE_EMBED_MIN_SIMILARITY for a model, since every model
spreads its cosines differently (docs/api.md, "The floor").

It prints:
- the floor's sweep: for absolute floors and relative floors (a share of the nearest
  document's similarity), the precision and recall of the documents the set's queries
  would find by meaning, and how many nonsense queries would find anything, from the
  cosines of the stored vectors;
- the shipped path end to end (documents_search in this process, the settings as
  given): the same figures, MRR@10, the relevant results' scores (median, lowest), the
  highest score of a result that is not a target, the queries in which such a result
  scores at least as high as a target, and the search's p50 / p95, for a query not
  searched before (its embedding asked of the provider) and for the same query again
  (its embedding kept in Redis); MRR@10 also with the results ordered by their score,
  rather than as ranked (rank fusion);
- with the set's own provider, 200 new queries while it accepts and never answers:
  their p50 / p95 / max and the calls that reached it (the breaker's doing).
"""

import argparse
import os
import time

import numpy as np
from _common import SCRATCH, bench_env, fresh_database, percentile, print_table
from django.conf import settings
from django.test import override_settings

from core.redis import redis_connection
from documents.models import Organisation
from retrieval.embedding import get_embedder
from retrieval.search import MEANING_RELATIVE, documents_search
from tests.support.concepts import DOCUMENTS, MODEL, QUERIES, ConceptServer
from tests.support.embedding_server import slow
from tests.support.runs import document_with_chunks

FLOORS = (0.1, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6)
RELATIVE = (0.0, 0.5, 0.6, 0.75)


def _provider(args, url: str) -> dict:
    return {
        "PAPERLANE_EMBEDDER": "retrieval.http_embedder.HttpEmbedder",
        "PAPERLANE_EMBED_URL": url,
        "PAPERLANE_EMBED_MODEL": args.model,
        "PAPERLANE_EMBEDDING_DIMENSIONS": args.dimensions,
        "PAPERLANE_EMBED_API_KEY_ENV": args.key_env,
        "PAPERLANE_SEARCH_FUSE_EMBEDDINGS": "always",
    }


def _sweep(vectors: dict[str, np.ndarray], queries: dict[str, np.ndarray]) -> list[list[str]]:
    rows = []
    for floor in FLOORS:
        for relative in RELATIVE:
            found = relevant = expected = noisy = 0
            for item in QUERIES:
                sims = {name: float(queries[item.query] @ v) for name, v in vectors.items()}
                top = max(sims.values())
                kept = {n for n, s in sims.items() if s >= max(floor, relative * top)}
                found += len(kept)
                relevant += len(kept & item.targets)
                expected += len(item.targets)
                noisy += bool(kept) and not item.targets
            precision = relevant / found if found else 1.0
            rows.append(
                [
                    f"{floor:.2f}",
                    f"{relative:.2f}",
                    f"{precision:.3f}",
                    f"{relevant / expected:.3f}",
                    f"{noisy} / 30",
                ]
            )
    return rows


def _end_to_end(organisation, repeat: int) -> list[list[str]]:
    found = relevant = expected = noisy = crossed = 0
    reciprocal, by_score, relevant_scores, other_scores, new, again = [], [], [], [], [], []
    for item in QUERIES:
        for turn in range(repeat):
            if turn == 0:  # a query not searched before: its embedding is asked for
                redis_connection().flushdb()
            started = time.perf_counter()
            results = documents_search(organisation=organisation, query=item.query, limit=10)
            (again if turn else new).append((time.perf_counter() - started) * 1000)
        names = [hit.filename for hit in results.hits]
        found += len(names)
        relevant += len(set(names) & item.targets)
        expected += len(item.targets)
        noisy += bool(names) and not item.targets
        if item.targets:
            reciprocal.append(_reciprocal(names, item.targets))
            scored = sorted(results.hits, key=lambda hit: -hit.score)
            by_score.append(_reciprocal([hit.filename for hit in scored], item.targets))
        mine = [hit.score for hit in results.hits if hit.filename in item.targets]
        others = [hit.score for hit in results.hits if hit.filename not in item.targets]
        relevant_scores += mine
        other_scores += others
        crossed += bool(mine and others and max(others) >= min(mine))
    return [
        [
            f"{relevant / found if found else 1.0:.3f}",
            f"{relevant / expected:.3f}",
            f"{noisy} / 30",
            f"{sum(reciprocal) / len(reciprocal):.3f} / {sum(by_score) / len(by_score):.3f}",
            f"{percentile(relevant_scores, 50):.3f} / {min(relevant_scores):.3f}",
            f"{max(other_scores):.3f}" if other_scores else "none shown",
            str(crossed),
            f"{percentile(new, 50):.1f} / {percentile(new, 95):.1f}",
            f"{percentile(again, 50):.1f} / {percentile(again, 95):.1f}" if again else "-",
        ]
    ]


def _reciprocal(names: list[str], targets: frozenset[str]) -> float:
    first = next((n for n, name in enumerate(names, 1) if name in targets), None)
    return 1 / first if first else 0.0


def _stalled(organisation, server: ConceptServer, searches: int) -> list[list[str]]:
    """Searches while the provider accepts and never answers: each new query's cost, and
    the calls that reached the provider."""
    redis_connection().flushdb()
    server.fail_until_told(slow(60))
    before = len(server.requests)
    took = []
    try:
        for n in range(searches):
            started = time.perf_counter()
            documents_search(organisation=organisation, query=f"physician {n}", limit=10)
            took.append((time.perf_counter() - started) * 1000)
    finally:
        server.recover()
    budget = settings.PAPERLANE_SEARCH_EMBED_BUDGET_MS
    return [
        [
            str(budget),
            str(searches),
            f"{percentile(took, 50):.1f} / {percentile(took, 95):.1f} / {max(took):.1f}",
            str(len(server.requests) - before),
        ]
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--provider-url", help="an OpenAI-compatible provider, not the set's own")
    parser.add_argument("--model", default=MODEL)
    parser.add_argument("--dimensions", type=int, default=64)
    parser.add_argument("--key-env", default="OPENAI_API_KEY")
    parser.add_argument("--repeat", type=int, default=5, help="times each query is timed")
    args = parser.parse_args()
    fresh_database(bench_env(str(SCRATCH / "media")))
    server = None if args.provider_url else ConceptServer().__enter__()
    url = args.provider_url or server.url
    try:
        with override_settings(**_provider(args, url)):
            organisation = Organisation.objects.create(name="Meaning", slug="meaning")
            embedder = get_embedder()
            names = list(DOCUMENTS)
            stored = embedder.embed([DOCUMENTS[n] for n in names])
            for name, vector in zip(names, stored, strict=True):
                document_with_chunks(organisation, name, [DOCUMENTS[name]], vectors=[vector])
            texts = [item.query for item in QUERIES]
            vectors = dict(zip(names, map(np.array, stored), strict=True))
            queries = dict(zip(texts, map(np.array, embedder.embed(texts)), strict=True))
            print(f"model {embedder.name} at {url}: {len(names)} documents, {len(QUERIES)} queries")
            print("\nThe floor's sweep (documents found by meaning, from the stored vectors):")
            print_table(
                ["floor", "relative", "precision", "recall", "nonsense finding any"],
                _sweep(vectors, queries),
            )
            print(
                f"\nThe shipped path (documents_search; floor "
                f"{getattr(embedder, 'min_similarity', settings.PAPERLANE_EMBED_MIN_SIMILARITY)}, "
                f"relative {MEANING_RELATIVE}):"
            )
            print_table(
                [
                    "precision",
                    "recall",
                    "nonsense finding any",
                    "MRR@10 as ranked / by score",
                    "relevant score p50 / min",
                    "highest other score",
                    "queries with an other above a relevant",
                    "new query p50 / p95 ms",
                    "again p50 / p95 ms",
                ],
                _end_to_end(organisation, args.repeat),
            )
            if server is not None:
                print("\nA provider that accepts and never answers (new queries, in process):")
                print_table(
                    ["budget ms", "searches", "p50 / p95 / max ms", "calls reaching it"],
                    _stalled(organisation, server, 200),
                )
    finally:
        if server is not None:
            server.__exit__(None, None, None)
    os.environ.pop("PAPERLANE_EMBEDDER", None)


if __name__ == "__main__":
    main()
