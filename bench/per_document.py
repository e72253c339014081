"""What one document costs PostgreSQL and Redis: statements, commits, rows, commands.

    .venv/bin/python bench/per_document.py [--documents 20] [--pages 1]

Uploads N PDFs through the API (Django's test client, in this process), then runs
the whole pipeline in this process with one RQ SimpleWorker on every stage queue in
burst mode: the same accept path, stage jobs, on_success callbacks and RQ
bookkeeping as `run_workers`, without the timing noise of other processes. It
counts, per document:

- PostgreSQL statements this process sent, by kind (Django's execute_wrapper);
- commits and rows inserted/updated/deleted in the bench database (pg_stat_database,
  every connection: the lease keeper's renewals and the extract child included);
- Redis commands (the server's INFO commandstats), on a private redis-server the
  script starts, so nothing else is counted;
- CPU: this process's (the worker: RQ, Django, the stage bodies) and the extract
  children's, per document; and per stage, the median and p95 of StageAttempt.cpu_ms
  (the stage body's thread CPU and its isolated children's) and of its duration (start to finish).

The sweeper is not part of a document's path: its pass is counted separately, with
no run in flight (the idle cost every host pays each PAPERLANE_SWEEP_INTERVAL_SECONDS).
Needs redis-server on PATH; uses BENCH_DB (default paperlane_bench).
"""

import argparse
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter

import redis


def _private_redis() -> tuple[subprocess.Popen, str, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    directory = tempfile.mkdtemp(prefix="paperlane-count-redis-")
    command = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
    command += ["--appendonly", "no", "--dir", directory]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.RedisError:
            time.sleep(0.05)
    return process, f"redis://127.0.0.1:{port}/0", directory


if shutil.which("redis-server") is None:
    sys.exit("per_document.py needs redis-server on PATH")
REDIS_PROCESS, REDIS_URL, REDIS_DIR = _private_redis()
# _common reads these when imported: the private Redis, and the test client's host name.
os.environ["BENCH_REDIS_URL"] = REDIS_URL
os.environ["ALLOWED_HOSTS"] = "testserver"

import psycopg  # noqa: E402
from _common import BENCH_DB, PG_ADMIN_URL, SCRATCH, bench_env, fresh_database  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from rq.worker import SimpleWorker  # noqa: E402

from core.redis import redis_connection  # noqa: E402
from documents.services.organisations import organisation_create  # noqa: E402
from documents.services.tokens import api_token_create  # noqa: E402
from pipeline.broker import get_queue  # noqa: E402
from pipeline.models import ImportRun, RunSource, StageAttempt  # noqa: E402
from pipeline.queues import all_queue_names  # noqa: E402
from pipeline.stage_list import STAGES, first_stage  # noqa: E402
from pipeline.sweeper import sweep_once  # noqa: E402
from tests.support.files import make_pdf  # noqa: E402


class StatementCounter:
    """execute_wrapper: statements by their first word (SELECT, INSERT, UPDATE, ...)."""

    def __init__(self) -> None:
        self.kinds: Counter[str] = Counter()

    def __call__(self, execute, sql, params, many, context):
        self.kinds[sql.lstrip().split(None, 1)[0].upper()] += 1
        return execute(sql, params, many, context)


def _database_totals() -> dict[str, int]:
    # Backends report their counters when they go idle, at most once a second.
    time.sleep(1.5)
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit, tup_inserted, tup_updated, tup_deleted FROM pg_stat_database "
            "WHERE datname = %s",
            [BENCH_DB],
        ).fetchone()
    return dict(zip(("commits", "inserted", "updated", "deleted"), row, strict=True))


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _redis_totals() -> Counter[str]:
    stats = redis.Redis.from_url(REDIS_URL).info("commandstats")
    return Counter({name.removeprefix("cmdstat_"): v["calls"] for name, v in stats.items()})


class Window:
    """Everything counted between `start` and `stop`."""

    def __enter__(self):
        connection.close()
        self.cpu = _cpu_seconds()
        self.statements = StatementCounter()
        self.database = _database_totals()
        self.redis = _redis_totals()
        self._wrapper = connection.execute_wrapper(self.statements)
        self._wrapper.__enter__()
        return self

    def __exit__(self, *exc):
        self._wrapper.__exit__(*exc)
        self.cpu = _cpu_seconds() - self.cpu
        connection.close()
        after = _database_totals()
        self.database = {k: after[k] - v for k, v in self.database.items()}
        redis_after = _redis_totals()
        redis_after.subtract(self.redis)
        # The counting itself (INFO) and the waits are not the document's.
        self.redis = Counter({k: v for k, v in redis_after.items() if v > 0 and k != "info"})


def report(title: str, window: Window, per: int) -> None:
    statements = window.statements.kinds
    print(f"\n{title} (per document, {per} documents)")
    print(
        "  PostgreSQL statements from the worker/request: "
        + ", ".join(f"{k} {v / per:.1f}" for k, v in statements.most_common())
        + f"; total {sum(statements.values()) / per:.1f}"
    )
    db = window.database
    writes = db["inserted"] + db["updated"] + db["deleted"]
    print(
        f"  PostgreSQL (all connections): commits {db['commits'] / per:.1f}, rows written "
        f"{writes / per:.1f} (inserted {db['inserted'] / per:.1f}, updated "
        f"{db['updated'] / per:.1f}, deleted {db['deleted'] / per:.1f})"
    )
    total = sum(window.redis.values())
    top = ", ".join(f"{k} {v / per:.1f}" for k, v in window.redis.most_common(12))
    print(f"  Redis commands: {total / per:.1f} ({top})")
    print(f"  CPU of this process and its children: {window.cpu / per * 1000:.0f} ms")


def report_stages(run_ids) -> None:
    print("\nper stage (StageAttempt): cpu_ms median / p95, duration ms median / p95")
    attempts = StageAttempt.objects.filter(run_id__in=run_ids, outcome="succeeded")
    for spec in STAGES:
        rows = list(
            attempts.filter(stage=spec.name).values_list("cpu_ms", "started_at", "finished_at")
        )
        if not rows:
            first = first_stage(RunSource.API)
            print(f"  {spec.name:8} not run for these documents (uploads start at {first})")
            continue
        cpu = sorted(r[0] or 0 for r in rows)
        wall = sorted((r[2] - r[1]).total_seconds() * 1000 for r in rows)
        print(
            f"  {spec.name:8} {statistics.median(cpu):6.0f} / {_p95(cpu):6.0f}   "
            f"{statistics.median(wall):6.0f} / {_p95(wall):6.0f}   ({len(rows)} attempts)"
        )


def _p95(values: list[float]) -> float:
    return values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--documents", type=int, default=20)
    parser.add_argument("--pages", type=int, default=1)
    options = parser.parse_args()
    env = bench_env(str(SCRATCH / "media"))
    fresh_database(env)
    organisation = organisation_create(slug="count", page_limit=10_000_000, name="Count")
    _, token = api_token_create(organisation=organisation, name="count")
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    files = [make_pdf(options.pages, label=f"Doc {n}") for n in range(options.documents)]
    # One warm-up document outside the windows: first-use caches, RQ's queue registrations.
    client.post("/api/v1/documents", {"file": _named(make_pdf(1, label="warm"))})
    _drain()

    run_ids = []
    with Window() as accept:
        for data in files:
            response = client.post("/api/v1/documents", {"file": _named(data)})
            assert response.status_code == 202, response.content
            run_ids.append(response.json()["run_id"])
    with Window() as pipeline:
        _drain()
    ended = Counter(ImportRun.objects.values_list("status", flat=True))
    assert ended == {"succeeded": options.documents + 1}, ended
    with Window() as sweep:
        sweep_once()

    n = options.documents
    print(f"{n} PDFs of {options.pages} page(s); bench database {BENCH_DB}; private Redis")
    report("accept (POST /api/v1/documents)", accept, n)
    report("pipeline (its stages and RQ bookkeeping)", pipeline, n)
    report("one idle sweeper pass (not per document)", sweep, 1)
    report_stages(run_ids)


def _named(data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile("doc.pdf", data)


def _drain() -> None:
    # In burst mode RQ polls each lane with LPOP instead of one BLPOP over all of them, so
    # the Redis counts include about 9 LPOPs per stage job that running workers do not make.
    queues = [get_queue(name) for name in all_queue_names()]
    SimpleWorker(queues, connection=redis_connection()).work(burst=True, logging_level="WARNING")


if __name__ == "__main__":
    try:
        main()
    finally:
        REDIS_PROCESS.kill()
        REDIS_PROCESS.wait()
        shutil.rmtree(REDIS_DIR, ignore_errors=True)
        shutil.rmtree(SCRATCH, ignore_errors=True)
