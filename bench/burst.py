"""The burst: N simultaneous uploads under chaos, every run followed to its end.

    make bench-burst
    .venv/bin/python bench/burst.py [-n 500] [--clients 32] [--kill-every 5] [--outage 10]
        [--no-chaos] [--json PATH] [--chart PATH] [--keep] [--url URL --token TOKEN]
        [--timeout 1200] [--web-workers 3] [--web-threads 2] [--nice-workers 0] [--seed 9]
        [--webhooks]

Without --url it starts what it needs, all on 127.0.0.1: a fresh PostgreSQL
database (BENCH_DB, migrated) and an emptied Redis db (BENCH_REDIS_URL),
gunicorn serving config.wsgi, and `manage.py run_workers` (default stage
concurrency) in its own process group, whose embedding provider is
bench/_embedders.OutageEmbedder. Four organisations: three with room to
spare and "tight", whose page limit is 40% of the pages sent to it, so some of
its uploads are refused at accept (402) and some of its runs fail "over
quota" at extraction (a DOCX that said 1 page has more); both are correct,
and pages used + reserved must still never pass a limit. Everything it started
is stopped (process groups) at the end, on an error or on Ctrl-C, unless --keep.

With --url and --token it only measures a stack that is already running: it
uploads to that token's organisation, reads the database and Redis named by
BENCH_DB and BENCH_REDIS_URL (which must be the stack's), and does no chaos.

The documents (bench/_burst_corpus.py) are PDFs and DOCX files of 1 to 300
pages, all different, written once to a scratch directory. Each client is a
thread with one HTTP connection, sending its organisation's share of the
documents one after another; all start at once. A `429` is counted as
`refused` and the upload is sent again after its `Retry-After` (at most
MAX_TRIES times, each wait at most RETRY_AFTER_CAP seconds).

While it runs (bench/_burst_watch.py): every --kill-every seconds a random
stage worker (a child of our run_workers, found through /proc) is SIGKILLed;
the supervisor starts it again (counted as worker_restarts); the embedding
provider answers 503 for --outage seconds once 10% of the uploads have
ended; the workers' Redis db is flushed (FLUSHDB, once) once 35% have ended.
Every second it samples queue lag (the age of the oldest due run no worker
holds, from the database, and the jobs waiting in every stage's RQ queues)
and throughput (runs ended per second).

With --webhooks, a receiver on loopback (allowed by PAPERLANE_WEBHOOK_ALLOWED_NETWORKS)
gets the webhooks of an endpoint of each organisation subscribed to every event, and
once the runs have ended it checks that each ended run was told once (one `run.*` event
id), each signature valid (bench/_burst_webhooks.py); run it with and without to compare
the accept latency.

Then it waits (at most --timeout seconds) until every accepted run has ended,
checks the database and prints a table, the "Done means" criteria of issue 9
with PASS/FAIL, and writes --json and --chart (an HTML page with the SVG inline;
a path ending in .svg gets the bare SVG, for the README).

Definitions:
- accept latency: from sending a request to reading its whole response, per
  202 response; "small" documents have at most 5 pages, "large" at least 100.
- drain_seconds: first upload sent -> the last accepted run's finished_at.
- drain_ideal_seconds: the time the pipeline needs if no worker ever waits or
  loses work, the larger of two bounds. drain_ideal_wall_seconds: per stage,
  the sum of its successful attempts' durations (StageAttempt finished_at -
  started_at, accepted runs only) divided by the number of workers of that
  stage; the slowest stage bounds the pipeline. drain_ideal_cpu_seconds: the
  CPU of every successful attempt (StageAttempt.cpu_ms: the stage body's thread
  and its isolated extraction children) divided by the machine's cores; no
  order of the work beats it. Both leave out work lost to kills and retries,
  and the waits the chaos causes (a lease expiring, a backoff, a paused
  provider), which is why the drain is compared to them. Attempt durations are
  wall time on a shared machine, so CPU contention is in the first: a stage
  that had the CPU to itself for a while (its neighbour paused) lowers it
  though no work was saved, which the second does not allow.
- duplicate_chunks: chunk rows sharing (document, version, index), plus rows
  beyond a succeeded document's recorded chunk count.
- double_charges: usage entries beyond one per organisation, document and version.
- quota_overshoot: sum over organisations of max(0, used + reserved - limit),
  at the end and the largest seen in the samples.
"""

import argparse
import contextlib
import http.client
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import redis
from _common import (  # first: it sets Django up against the bench database
    BENCH_DB,
    BENCH_REDIS_URL,
    ROOT,
    SCRATCH,
    bench_env,
    fresh_database,
    percentile,
)

# isort: split
from _burst_clients import send_all
from _burst_corpus import LARGE_MIN_PAGES, SMALL_MAX_PAGES, Upload, build_corpus
from _burst_figures import (
    ACCESS_LOG_FORMAT,
    accepted_in_gunicorn,
    charges,
    double_charges,
    duplicate_chunks,
    ended_by_seconds,
    quota_books,
    quota_overshoot,
    run_outcomes,
    span_seconds,
    stage_work,
    stage_worker_counts,
)
from _burst_report import criteria, print_report, write_chart
from _burst_watch import Chaos, ChaosPlan, Sampler, queue_lengths
from _burst_webhooks import ALLOWED, endpoints_create, webhook_criterion, webhook_figures
from _cpu import machine_load
from _embedders import OUTAGE_FLAG_ENV
from _workers import log_problems, wait_workers, warm_up
from django.db import close_old_connections
from django.utils import timezone

from documents.services.organisations import organisation_create
from documents.services.tokens import api_token_authenticate, api_token_create
from pipeline.lag import stage_lags
from tests.support.pipeline import runs_not_ended
from tests.support.processes import free_port, stop_group
from tests.support.receiver import receiver

ACCESS_LOG = SCRATCH / "gunicorn-access.log"
LAG_GRACE = 30.0  # seconds for the queues to empty once every run has ended
TIGHT_SHARE = 0.40  # the tight organisation's limit, as a share of the pages sent to it
ROOMY_LIMIT = 10_000_000
ORGANISATIONS = ["north", "south", "east", "tight"]
CLIENTS_WHY = (
    "{clients} clients, one keep-alive connection each, like integrations' HTTP pools: "
    "{over}x the {slots} requests gunicorn serves at once, so a queue forms at the server as "
    "in a real burst, far below its listen backlog; not one thread per upload, whose own CPU "
    "on {cores} cores would be charged to the server's latency"
)


# --- Processes --------------------------------------------------------------------------


def start_gunicorn(env: dict[str, str], workers: int, threads: int, log: Path, access: Path):
    """gunicorn on a free loopback port in its own process group; (process, base URL).
    `access` gets one line per request (ACCESS_LOG_FORMAT): the method, the status, the
    microseconds gunicorn spent on it (from taking it up, so time waiting for a free slot
    is not in it) and the process that served it.

    `--reuse-port`, as docs/production.md advises: each process listens on a socket of
    its own and the kernel spreads new connections over them. On one shared socket the
    clients' keep-alive connections stayed where they landed: in one run one of the
    three processes served 341 of 500 uploads while the other two idled half the time."""
    port = free_port()
    command = [
        sys.executable, "-m", "gunicorn", "config.wsgi:application",
        "--bind", f"127.0.0.1:{port}", "--workers", str(workers), "--threads", str(threads),
        "--log-level", "warning", "--timeout", "60", "--reuse-port",
        "--access-logfile", str(access), "--access-logformat", ACCESS_LOG_FORMAT,
    ]  # fmt: skip
    with open(log, "ab") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=out, stderr=out, start_new_session=True
        )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/api/v1/openapi.json")
            if conn.getresponse().status == 200:
                conn.close()
                return process, base
        except OSError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"gunicorn did not start; see {log}")
        time.sleep(0.2)


def start_run_workers(env: dict[str, str], log: Path, nice: int) -> subprocess.Popen:
    """`manage.py run_workers` in its own process group, at CPU priority `nice` (0: as we)."""
    prefix = ["nice", "-n", str(nice)] if nice else []  # nice execs: the pid is run_workers'
    with open(log, "ab") as out:
        return subprocess.Popen(
            [*prefix, sys.executable, "manage.py", "run_workers"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


# --- The burst --------------------------------------------------------------------------


def wait_ended(run_ids: list[str], deadline: float, alive) -> dict[str, int]:
    """Poll until every run has ended or the deadline passes; what had not ended."""
    while True:
        close_old_connections()
        left = runs_not_ended(run_ids)
        if not left or time.monotonic() > deadline or not alive():
            return left
        time.sleep(1.0)


def wait_lag_zero(connection: redis.Redis) -> float | None:
    """Seconds until no run is due unheld and every stage queue is empty (None: not in
    LAG_GRACE seconds)."""
    started = time.monotonic()
    while time.monotonic() - started < LAG_GRACE:
        close_old_connections()
        lags = [lag for lag in stage_lags().values() if lag]
        if not lags and not any(queue_lengths(connection).values()):
            return time.monotonic() - started
        time.sleep(0.5)
    return None


def burst(args, base: str, tokens: dict[str, str], uploads, org_ids, supervisor, flag) -> dict:
    connection = redis.Redis.from_url(BENCH_REDIS_URL)
    stop = threading.Event()
    origin = time.monotonic()
    origin_at = timezone.now()
    deadline = origin + args.timeout
    sampler = Sampler(connection, origin=origin, organisation_ids=org_ids, timeout=args.timeout)
    chaos = None
    if supervisor is not None and not args.no_chaos:
        plan = ChaosPlan(
            kill_every=args.kill_every, outage_seconds=args.outage, outage_at=0.10, flush_at=0.35
        )

        def progress() -> float:
            last = sampler.samples[-1] if sampler.samples else None
            return last.ended / len(uploads) if last else 0.0

        chaos = Chaos(
            plan,
            supervisor_pid=supervisor.pid,
            redis=connection,
            outage_flag=flag,
            progress=progress,
            origin=origin,
            timeout=args.timeout,
        )
    sampler.start()
    if chaos is not None:
        chaos.start()
    try:
        requests, outcomes = send_all(base, tokens, uploads, args.clients, origin, stop)
        upload_seconds = time.monotonic() - origin
        accepted = [o.run_id for o in outcomes if o.run_id]
        alive = (lambda: supervisor.poll() is None) if supervisor else (lambda: True)
        unfinished = wait_ended(accepted, deadline, alive)
        ended_after = time.monotonic() - origin
    except BaseException:
        sampler.stop()
        raise
    finally:
        stop.set()
        if chaos is not None:
            chaos.stop()
    lag_zero_after = wait_lag_zero(connection) if not unfinished else None
    time.sleep(1.5)  # two more samples after the end for the chart
    sampler.stop()
    if chaos is not None:
        chaos.await_restarts(timeout=35)  # the supervisor's longest pause is 30 s
    return {
        "requests": requests,
        "outcomes": outcomes,
        "accepted_ids": accepted,
        "unfinished": unfinished,
        "upload_seconds": upload_seconds,
        "ended_after": ended_after,
        "lag_zero_after": lag_zero_after,
        "origin_at": origin_at,
        "sampler": sampler,
        "chaos": chaos,
    }


# --- Figures, criteria, output ----------------------------------------------------------


def figures(args, result: dict, org_ids: list[int], slots: int) -> dict:
    close_old_connections()
    requests, outcomes = result["requests"], result["outcomes"]
    accepted_ids = result["accepted_ids"]
    statuses = Counter(r.status for r in requests)
    ok = [r for r in requests if r.status == 202]
    small = [r.ms for r in ok if r.pages <= SMALL_MAX_PAGES]
    large = [r.ms for r in ok if r.pages >= LARGE_MIN_PAGES]
    runs = run_outcomes(accepted_ids)
    work = stage_work(accepted_ids, stage_worker_counts(), os.cpu_count() or 1)
    drain = span_seconds(result["origin_at"], runs["last_finished"])
    samples = result["sampler"].samples
    chaos: Chaos | None = result["chaos"]
    final_status = Counter(o.status for o in outcomes)
    # Empty without our gunicorn (--url).
    access_log = ACCESS_LOG.read_text() if ACCESS_LOG.exists() else ""
    server_times, per_process = accepted_in_gunicorn(access_log)
    out = {
        "uploads": len(outcomes),
        "clients": args.clients,
        "accepted": len(accepted_ids),
        "refused": statuses.get(429, 0),
        "refused_uploads": final_status.get(429, 0),
        "over_quota_at_accept": final_status.get(402, 0),
        "other_client_errors": sum(
            n for s, n in final_status.items() if 400 <= s < 500 and s not in (402, 429)
        ),
        "server_errors": sum(n for s, n in statuses.items() if s >= 500),
        "transport_errors": statuses.get(0, 0),
        "http_statuses": {str(k): v for k, v in sorted(statuses.items())},
        "terminal": runs["terminal"],
        "by_status": runs["by_status"],
        "failed_by_error": runs["errors"],
        "unfinished": result["unfinished"],
        "duplicate_chunks": duplicate_chunks(accepted_ids),
        "double_charges": double_charges(accepted_ids),
        **charges(accepted_ids),
        "quota_overshoot": quota_overshoot(org_ids),
        "quota_overshoot_max_sampled": max((s.overshoot for s in samples), default=0),
        "quota": quota_books(org_ids),
        "accept_p50_ms": percentile([r.ms for r in ok], 50),
        "accept_p99_ms": percentile([r.ms for r in ok], 99),
        "accept_max_ms": max((r.ms for r in ok), default=float("nan")),
        "accept_p99_ms_small": percentile(small, 99),
        "accept_p99_ms_large": percentile(large, 99),
        "accepted_small": len(small),
        "accepted_large": len(large),
        "all_responses_p99_ms": percentile([r.ms for r in requests], 99),
        # In gunicorn: the rest of a request's time it waited for a free slot.
        "accept_server_p50_ms": percentile(server_times, 50),
        "accept_server_p99_ms": percentile(server_times, 99),
        "accepted_per_web_process": per_process,
        "upload_seconds": result["upload_seconds"],
        "drain_seconds": drain,
        "drain_ideal_seconds": work["drain_ideal_seconds"],
        "drain_ideal_wall_seconds": work["drain_ideal_wall_seconds"],
        "drain_ideal_cpu_seconds": work["drain_ideal_cpu_seconds"],
        "drain_p99_seconds": ended_by_seconds(accepted_ids, result["origin_at"], 0.99),
        "slowest_stage": work["slowest_stage"],
        "stage_work": work["stages"],
        "attempt_outcomes": work["attempt_outcomes"],
        "retries": work["retries"],
        "lag_max_seconds": max((s.db_lag_s for s in samples), default=0.0),
        "queued_max": max((s.queued for s in samples), default=0),
        "throughput_max_per_s": max((s.throughput for s in samples), default=0.0),
        "lag_zero_after_seconds": result["lag_zero_after"],
        "worker_restarts": chaos.restarts if chaos else 0,
        "worker_kills": chaos.kills if chaos else 0,
        "redis_flushes": chaos.flushes if chaos else 0,
        "provider_outage_seconds": round(chaos.outage_seconds, 1) if chaos else 0.0,
        "sampler_errors": result["sampler"].errors,
        "gunicorn_slots": slots,
        "small_max_pages": SMALL_MAX_PAGES,
        "large_min_pages": LARGE_MIN_PAGES,
    }
    return out


# --- Main -------------------------------------------------------------------------------


def json_safe(value):
    """NaN (a percentile of nothing) as null: JSON has no NaN."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def organisations(uploads: list[Upload]) -> tuple[dict[str, str], list[int]]:
    """The four organisations and an API token each; the tight one's limit is
    TIGHT_SHARE of the pages sent to it."""
    tokens, ids = {}, []
    for slug in ORGANISATIONS:
        if slug == "tight":
            sent = sum(u.pages for u in uploads if u.organisation == slug)
            limit = max(10, round(sent * TIGHT_SHARE))
        else:
            limit = ROOMY_LIMIT
        org = organisation_create(slug=slug, page_limit=limit, name=slug.title())
        tokens[slug] = api_token_create(organisation=org, name="burst")[1]
        ids.append(org.id)
    return tokens, ids


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=500, help="uploads (default 500)")
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients")
    parser.add_argument("--kill-every", type=float, default=5.0, help="seconds between kills")
    parser.add_argument("--outage", type=float, default=10.0, help="provider outage, seconds")
    parser.add_argument("--no-chaos", action="store_true", help="no kills, flush nor outage")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--chart", type=Path, help="write the chart here (.html, or .svg)")
    parser.add_argument("--url", help="measure a running stack (with --token)")
    parser.add_argument("--token", help="API token for --url")
    parser.add_argument("--keep", action="store_true", help="leave the stack running")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds to wait for runs")
    parser.add_argument("--web-workers", type=int, default=3, help="gunicorn processes")
    parser.add_argument("--web-threads", type=int, default=2, help="threads per process")
    parser.add_argument(
        "--nice-workers",
        type=int,
        default=0,
        help="run the workers at this CPU niceness, so the web gets the CPU first (0: same)",
    )
    parser.add_argument("--seed", type=int, default=9, help="of the documents and the chaos")
    parser.add_argument(
        "--webhooks",
        action="store_true",
        help="an endpoint of each organisation, every event, to a receiver on loopback",
    )
    args = parser.parse_args()
    if args.n < 1 or args.clients < 1 or args.kill_every < 0 or args.timeout <= 0:
        parser.error("-n and --clients must be positive, --kill-every >= 0, --timeout > 0")
    if bool(args.url) != bool(args.token):
        parser.error("--url and --token go together")
    if args.url and urlsplit(args.url).hostname not in ("127.0.0.1", "localhost"):
        parser.error("--url must be on 127.0.0.1: this bench sends traffic nowhere else")
    if args.webhooks and args.url:
        parser.error("--webhooks starts its own stack: not with --url")

    # SIGTERM (as `timeout` sends) unwinds like Ctrl-C, so the finally below stops the stack.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    print(f"Scratch directory {SCRATCH}; database {BENCH_DB}, Redis {BENCH_REDIS_URL}")
    # A shared machine's other work competes for the same cores: say how busy it was.
    load_before = machine_load()
    print(f"Machine before the bench: {load_before}, {os.cpu_count()} cores")
    started = time.monotonic()
    slots = args.web_workers * args.web_threads
    processes: list[tuple[subprocess.Popen, float]] = []
    flag = SCRATCH / "embed-outage"
    worker_log = SCRATCH / "run_workers.log"
    supervisor = None
    base = args.url or ""
    tokens: dict[str, str] = {}
    hooks = contextlib.ExitStack()
    try:
        if args.url:
            token = api_token_authenticate(raw=args.token)
            if token is None:
                parser.error(f"--token is not a live token in the database {BENCH_DB}")
            uploads = build_corpus(args.n, ["given"], SCRATCH / "files", seed=args.seed)
            tokens, org_ids, base = {"given": args.token}, [token.organisation_id], args.url
        else:
            uploads = build_corpus(args.n, ORGANISATIONS, SCRATCH / "files", seed=args.seed)
            env = bench_env(
                str(SCRATCH / "media"),
                PAPERLANE_EMBEDDER="bench._embedders.OutageEmbedder",
                **{OUTAGE_FLAG_ENV: str(flag)},
                **({"PAPERLANE_WEBHOOK_ALLOWED_NETWORKS": ALLOWED} if args.webhooks else {}),
            )
            fresh_database(env)
            tokens, org_ids = organisations(uploads)
            if args.webhooks:
                hook_url, script = hooks.enter_context(receiver(200))
                secrets = endpoints_create(hook_url, org_ids)
            web, base = start_gunicorn(
                env, args.web_workers, args.web_threads, SCRATCH / "gunicorn.log", ACCESS_LOG
            )
            processes.append((web, 10))
            supervisor = start_run_workers(env, worker_log, args.nice_workers)
            processes.append((supervisor, 60))
            wait_workers(supervisor)
            warm_up(base, tokens["north"], supervisor, worker_log)
            ACCESS_LOG.write_text("")  # gunicorn appends (O_APPEND): the burst's requests only
        print(
            f"{len(uploads)} documents ready ({time.monotonic() - started:.0f} s); "
            f"bursting from {args.clients} clients to {base}"
        )
        result = burst(args, base, tokens, uploads, org_ids, supervisor, flag)
        f = figures(args, result, org_ids, slots)
        f["machine_before"], f["machine_after"] = load_before, machine_load()
        print(f"Machine after the burst: {f['machine_after']}")
        chaos_on = result["chaos"] is not None
        checks = criteria(f, chaos_on)
        if args.webhooks:
            f.update(webhook_figures(script, secrets, result["accepted_ids"], wait=120))
            checks.append(webhook_criterion(f))
        f["criteria"] = {name: {"pass": ok, "measured": d} for name, ok, d in checks}
        explain = [
            f"small = at most {SMALL_MAX_PAGES} pages, large = at least {LARGE_MIN_PAGES} pages; "
            "accept latency is per 202 response, send to whole answer.",
            "drain = first upload sent to the last accepted run's end; ideal = the larger of: "
            "for the slowest stage, the sum of its successful attempts' durations / its "
            "workers; the CPU of every successful attempt / the cores (work lost to kills, "
            "retries and waits for leases, backoff or a paused provider is in neither).",
        ]
        if args.url:
            explain.insert(0, f"{args.clients} clients against {args.url}, whose size is its own.")
        else:
            explain[:0] = [
                CLIENTS_WHY.format(
                    clients=args.clients,
                    over=round(args.clients / slots, 1),
                    slots=slots,
                    cores=os.cpu_count(),
                )
                + ".",
                f"gunicorn {args.web_workers} processes x {args.web_threads} threads ({slots} at "
                "once) for 2 cores: one process per core and one spare for when one waits on "
                "PostgreSQL or the disk, two threads so a request's waits (the commit, the file "
                "write) overlap another's work; more only moves the queue inside gunicorn.",
            ]
            explain += [
                "tight organisation: limit 40% of the pages sent to it, so 402s at accept and "
                "'quota_exceeded' failures at extraction are expected, not errors.",
                f"run_workers log: {worker_log} ({log_problems(worker_log)} warning/error lines"
                + (", most from the chaos)" if chaos_on else ")"),
            ]
        if supervisor is not None and supervisor.poll() is not None:
            explain.append(f"run_workers EXITED (code {supervisor.returncode}); see {worker_log}")
        if result["unfinished"]:
            explain.append(f"GAVE UP after {args.timeout:.0f} s: not ended {result['unfinished']}")
        print_report(f, checks, explain)
        if args.json:
            data = {k: v for k, v in f.items()}
            data["samples"] = [s.__dict__ for s in result["sampler"].samples]
            if result["chaos"] is not None:
                data["events"] = [e.__dict__ for e in result["chaos"].events]
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(json_safe(data), indent=2, default=str))
            print(f"JSON written to {args.json}")
        if args.chart:
            args.chart.parent.mkdir(parents=True, exist_ok=True)
            title = f"Burst: {f['uploads']} uploads from {args.clients} clients"
            write_chart(args.chart, result, f, title + (" under chaos" if chaos_on else ""))
            print(f"Chart written to {args.chart}")
        print(f"Total bench time {time.monotonic() - started:.0f} s")
        return 0 if all(ok for _, ok, _ in checks) else 1
    finally:
        hooks.close()
        flag.unlink(missing_ok=True)
        if args.keep and processes:
            groups = " ".join(f"-{process.pid}" for process, _ in processes)
            print(f"Left running (--keep): API {base}; stop with: kill -TERM -- {groups}")
            for slug, token in tokens.items():
                print(f"  token of {slug}: {token}")
        else:
            for process, grace in reversed(processes):
                stop_group(process, grace=grace)
            # The documents and what the stack stored; the logs stay for reading.
            for name in ("files", "media"):
                shutil.rmtree(SCRATCH / name, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
