"""Accept-path latency: N uploads from C concurrent clients, against a real gunicorn.

    .venv/bin/python bench/accept.py [--uploads 200] [--clients 20] [--workers 4]

Starts gunicorn on PostgreSQL (database `paperlane_bench`, recreated) with no
stage workers running, so only the accept path is measured: validation,
storage, the quota reservation transaction and the enqueue. Prints p50/p95/p99
per document size, and the CPU each upload cost gunicorn and the database's
PostgreSQL backends (steadier than latency on a machine whose speed varies).
Target: p99 under 150 ms on two cores, and the 300-page p99 within 1.5x of the
1-page p99.
"""

import argparse
import time
from collections import Counter

from _common import (
    SCRATCH,
    bench_env,
    format_counts,
    fresh_database,
    median,
    organisation_with_token,
    percentile,
    print_table,
)
from _cpu import CpuMeter
from _http import UploadClient, from_clients

from tests.support.files import make_pdf, multipart_body
from tests.support.processes import free_port, start_web_server


def run_set(base: str, token: str, pdf: bytes, uploads: int, clients: int) -> dict:
    """POST the same PDF `uploads` times from `clients` threads; latencies in ms, statuses."""
    body, content_type = multipart_body("bench.pdf", pdf)

    def timed_post(client: UploadClient, _number: int) -> tuple[int, float]:
        started = time.perf_counter()
        status = client.post(body, content_type)[0]
        return status, (time.perf_counter() - started) * 1000

    meter = CpuMeter(supervisor_pid=-1)  # no stage workers: only gunicorn and PostgreSQL
    meter.start()
    started = time.perf_counter()
    results = from_clients(base, token, clients, range(uploads), timed_post, timeout=30)
    wall = time.perf_counter() - started
    meter.sample(final=True)
    return {
        "latencies": [elapsed for _, elapsed in results],
        "statuses": Counter(status for status, _ in results),
        "wall": wall,
        "web_cpu_ms": meter.seconds("web") * 1000 / uploads,
        "pg_cpu_ms": meter.seconds("pg") * 1000 / uploads,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uploads", type=int, default=200)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--workers", type=int, default=3, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=1, help="threads per gunicorn worker")
    parser.add_argument("--warmup", type=int, default=40)
    args = parser.parse_args()

    env = bench_env(str(SCRATCH / "media"))
    fresh_database(env)
    token = organisation_with_token(env, "bench", pages=10_000_000)
    sets = [("1 page", make_pdf(1)), ("300 pages", make_pdf(300))]

    rows = []
    with start_web_server(
        port=free_port(), env=env, workers=args.workers, threads=args.threads
    ) as base:
        run_set(base, token, sets[0][1], args.warmup, args.clients)
        for label, pdf in sets:
            result = run_set(base, token, pdf, args.uploads, args.clients)
            lat = result["latencies"]
            rows.append(
                [
                    label,
                    f"{len(pdf) / 1024:.0f} KiB",
                    str(len(lat)),
                    format_counts(result["statuses"]),
                    f"{median(lat):.1f}",
                    f"{percentile(lat, 95):.1f}",
                    f"{percentile(lat, 99):.1f}",
                    f"{max(lat):.1f}",
                    f"{len(lat) / result['wall']:.0f}",
                    f"{result['web_cpu_ms']:.1f}",
                    f"{result['pg_cpu_ms']:.1f}",
                ]
            )
    print(
        f"\nAccept path: {args.uploads} uploads, {args.clients} concurrent clients, "
        f"gunicorn {args.workers} workers x {args.threads} threads, PostgreSQL\n"
    )
    print_table(
        [
            "set",
            "size",
            "n",
            "statuses",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "max ms",
            "req/s",
            "web CPU ms/upload",
            "PostgreSQL CPU ms/upload",
        ],
        rows,
    )
    p99_small, p99_large = float(rows[0][6]), float(rows[1][6])
    print(
        f"\n300-page p99 / 1-page p99 = {p99_large / p99_small:.2f} (target <= 1.5); "
        f"worst p99 {max(p99_small, p99_large):.1f} ms (target < 150)"
    )


if __name__ == "__main__":
    main()
