"""The floor: a bare RQ chain of five no-op stages with our queues and worker layout.

    .venv/bin/python bench/floor.py [-n 200] [--chain direct|on_success] [--repeat 1]

What a one-page document would cost if the stages did nothing and kept no books:
the same stage queues (names from pipeline.queues), the same number of SimpleWorker
processes per stage as run_workers starts by default, each stage handing the
document to the next queue under a deterministic job id (`direct`: enqueued from
the job itself, as our engine does after its commit; `on_success`: from an RQ
callback). N first-stage jobs are enqueued while RQ is suspended; the workers
start, register and go quiet; then the flag is cleared and the chain drains.

worker CPU ms/doc  user+system CPU of the worker processes in the window / N
docs/s             N / (first stage-1 job started -> last stage-5 job finished)

bench/pipeline.py runs this beside our pipeline, same N, same hour.
"""

import argparse
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import redis
from _common import BENCH_REDIS_URL, bench_env, print_table
from _cpu import CORES, CpuMeter, machine_load, wait_quiet
from _floor_stage_worker import DONE_KEY, FIRST_KEY, LAST_KEY, enqueue
from _workers import wait_workers
from rq.suspension import resume, suspend

from pipeline.stage_list import STAGES

BENCH = Path(__file__).resolve().parent
CHAINS = ("direct", "on_success")


def floor_layout() -> list[tuple[str, int]]:
    """(queue, worker processes) per stage, in order: run_workers' defaults. The floor
    is bare RQ: one queue per stage, named after it, where ours has lanes."""
    return [(str(spec.name), spec.concurrency) for spec in STAGES]


@contextmanager
def floor_workers(env: dict[str, str]):
    """One bare SimpleWorker process per worker of our layout; stopped at the end."""
    processes = [
        subprocess.Popen(
            [sys.executable, str(BENCH / "_floor_stage_worker.py"), queue],
            cwd=BENCH,
            env=env,
        )
        for queue, count in floor_layout()
        for _ in range(count)
    ]
    try:
        yield processes
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def run_floor(n: int, *, chain: str = "direct", timeout: float = 120) -> dict:
    """Drain N documents through the bare chain; its figures."""
    connection = redis.Redis.from_url(BENCH_REDIS_URL)
    connection.flushdb()
    queues = [queue for queue, _ in floor_layout()]
    suspend(connection)
    try:
        for i in range(n):
            enqueue(connection, f"doc{i}", queues, 0, chain)
        with floor_workers(bench_env(str(BENCH), LOG_LEVEL="WARNING")) as processes:
            wait_workers(processes[0], suspended=True)
            # The workers are this process's children: it is their supervisor here.
            meter = CpuMeter(os.getpid())
            wait_quiet(meter)
            meter.start()
            resume(connection)
            deadline = time.monotonic() + timeout
            while int(connection.get(DONE_KEY) or 0) < n:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"floor: {connection.get(DONE_KEY)} of {n} done in time")
                if any(p.poll() is not None for p in processes):
                    raise RuntimeError("floor: a worker process exited")
                time.sleep(0.1)
                meter.sample()
            meter.sample(final=True)
    finally:
        resume(connection)
    elapsed = float(connection.get(LAST_KEY)) - float(connection.get(FIRST_KEY))
    connection.flushdb()
    workers = meter.seconds("workers")
    return {
        "name": f"floor ({chain})",
        "n": n,
        "docs_per_s": n / elapsed,
        "elapsed": elapsed,
        "cpu_ms_per_doc": workers * 1000 / n,
        "pg_ms_per_doc": 0.0,
        "cpu_workers": workers,
        "machine_busy": meter.machine_busy,
    }


def print_floor(results: list[dict]) -> None:
    headers = ["chain", "n", "worker CPU ms/doc", "docs/s", "drain s", "cpu busy"]
    rows = [
        [
            r["name"],
            str(r["n"]),
            f"{r['cpu_ms_per_doc']:.1f}",
            f"{r['docs_per_s']:.1f}",
            f"{r['elapsed']:.1f}",
            f"{r['machine_busy']:.2f}",
        ]
        for r in results
    ]
    print_table(headers, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=200, help="documents")
    parser.add_argument("--chain", choices=[*CHAINS, "both"], default="direct")
    parser.add_argument("--repeat", type=int, default=1, help="runs per chain")
    args = parser.parse_args()
    if args.n <= 0:
        parser.error("-n must be positive")
    layout = ", ".join(f"{queue} x{count}" for queue, count in floor_layout())
    print(f"Machine before: {machine_load()}, {CORES} cores")
    print(f"Floor: {args.n} documents through {layout} (SimpleWorker)\n")
    chains = CHAINS if args.chain == "both" else (args.chain,)
    results = [run_floor(args.n, chain=c) for c in chains for _ in range(args.repeat)]
    print_floor(results)
    print(f"\nMachine after: {machine_load()}")


if __name__ == "__main__":
    main()
