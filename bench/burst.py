"""The burst: N simultaneous uploads under chaos, every run followed to its end.

    make bench-burst
    .venv/bin/python bench/burst.py [-n 500] [--clients 32] [--kill-every 5] [--no-chaos]
        [--json PATH] [--chart PATH] [--keep] [--url URL --token TOKEN]

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

Then it waits (at most --timeout seconds) until every accepted run has ended,
checks the database and prints a table, the "Done means" criteria of issue 9
with PASS/FAIL, and writes --json and --chart (HTML with inline SVG).

Definitions:
- accept latency: from sending a request to reading its whole response, per
  202 response; "small" documents have at most 5 pages, "large" at least 100.
- drain_seconds: first upload sent -> the last accepted run's finished_at.
- drain_ideal_seconds: the time the pipeline needs if no worker ever waits or
  loses work: per stage, the sum of its successful attempts' durations
  (StageAttempt finished_at - started_at, accepted runs only) divided by the
  number of workers of that stage; the slowest stage bounds the pipeline, so
  the ideal is the largest of these. It leaves out work lost to kills and
  retries, and the waits the chaos causes (a lease expiring, a backoff), which
  is why the drain is compared to it. Attempt durations are wall time on a
  shared machine, so CPU contention is in both numbers.
- duplicate_chunks: chunk rows sharing (document, version, index), plus rows
  beyond a succeeded document's recorded chunk count.
- double_charges: usage entries beyond one per organisation, document and version.
- quota_overshoot: sum over organisations of max(0, used + reserved - limit),
  at the end and the largest seen in the samples.
"""

import argparse
import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass
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
    print_table,
)

# isort: split
from _burst_corpus import LARGE_MIN_PAGES, SMALL_MAX_PAGES, Upload, build_corpus
from _burst_figures import (
    charges,
    double_charges,
    duplicate_chunks,
    quota_books,
    quota_overshoot,
    run_outcomes,
    span_seconds,
    stage_work,
)
from _burst_watch import Chaos, ChaosPlan, Sampler, queue_lengths, stage_worker_pids
from _chart import Marks, Panel, Series, chart_page
from _embedders import OUTAGE_FLAG_ENV
from _workers import log_problems, wait_workers, warm_up
from django.db import close_old_connections
from django.utils import timezone

from documents.services.organisations import organisation_create
from documents.services.tokens import api_token_authenticate, api_token_create
from jobs.pipeline import STAGES
from jobs.stats.snapshot import stage_lags
from tests.support.files import multipart_body
from tests.support.pipeline import runs_not_ended
from tests.support.processes import free_port

MAX_TRIES = 6  # sends of one upload refused with 429, at most
RETRY_AFTER_CAP = 60.0  # seconds; a longer Retry-After is waited for this long
LAG_GRACE = 30.0  # seconds for the queues to empty once every run has ended
TIGHT_SHARE = 0.40  # the tight organisation's limit, as a share of the pages sent to it
ROOMY_LIMIT = 10_000_000
ORGANISATIONS = ["north", "south", "east", "tight"]
TARGETS = {"accept_p99_ms": 250.0, "large_over_small": 1.5, "drain_over_ideal": 1.3}
CLIENTS_WHY = (
    "{clients} clients, one keep-alive connection each, like integrations' HTTP pools: "
    "{over}x the {slots} requests gunicorn serves at once, so a queue forms at the server as "
    "in a real burst, far below its listen backlog; not one thread per upload, whose own CPU "
    "on {cores} cores would be charged to the server's latency"
)


# --- Processes --------------------------------------------------------------------------


def stop_group(process: subprocess.Popen, *, grace: float) -> None:
    """SIGTERM the process, wait `grace` seconds, then SIGKILL its whole process group."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def start_gunicorn(env: dict[str, str], workers: int, threads: int, log: Path):
    """gunicorn on a free loopback port in its own process group; (process, base URL)."""
    port = free_port()
    command = [
        sys.executable, "-m", "gunicorn", "config.wsgi:application",
        "--bind", f"127.0.0.1:{port}", "--workers", str(workers), "--threads", str(threads),
        "--log-level", "warning", "--timeout", "60",
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


def start_run_workers(env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "manage.py", "run_workers"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


# --- Uploads ----------------------------------------------------------------------------


class Client:
    """One HTTP connection to the API (reopened after a transport error)."""

    def __init__(self, base: str, token: str, timeout: float = 60) -> None:
        self.address = urlsplit(base)
        self.token = token
        self.timeout = timeout
        self.conn: http.client.HTTPConnection | None = None

    def post(self, body: bytes, content_type: str) -> tuple[int, str | None, bytes]:
        """(status or 0 on a transport error, Retry-After, body)."""
        if self.conn is None:
            self.conn = http.client.HTTPConnection(
                self.address.hostname, self.address.port, timeout=self.timeout
            )
        try:
            self.conn.request(
                "POST",
                "/api/v1/documents",
                body=body,
                headers={"Authorization": f"Bearer {self.token}", "Content-Type": content_type},
            )
            response = self.conn.getresponse()
            return response.status, response.getheader("Retry-After"), response.read()
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = None
            return 0, None, b""

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


@dataclass
class Request:
    number: int  # the upload's number
    pages: int
    status: int
    ms: float
    at: float  # seconds since the burst began, when it was sent


@dataclass
class Outcome:
    upload: Upload
    status: int  # of the last send
    run_id: str | None
    tries: int


def retry_after_seconds(value: str | None) -> float:
    try:
        return min(max(float(value or 1), 0.0), RETRY_AFTER_CAP)
    except ValueError:
        return 1.0  # an HTTP date or garbage: try again soon, still bounded by MAX_TRIES


def send_all(
    base: str, tokens: dict[str, str], uploads: list[Upload], clients: int, origin: float,
    stop: threading.Event,
) -> tuple[list[Request], list[Outcome]]:  # fmt: skip
    """Every upload, from `clients` threads started together; each client belongs to one
    organisation and sends that organisation's documents one after another."""
    queues = {org: deque(u for u in uploads if u.organisation == org) for org in tokens}
    orgs = sorted(tokens)
    lock = threading.Lock()
    requests: list[Request] = []
    outcomes: list[Outcome] = []
    start = threading.Barrier(clients + 1)

    def client_loop(index: int) -> None:
        org = orgs[index % len(orgs)]
        client = Client(base, tokens[org])
        try:
            start.wait(timeout=60)
            while not stop.is_set():
                with lock:
                    upload = queues[org].popleft() if queues[org] else None
                if upload is None:
                    return
                body, content_type = multipart_body(upload.filename, upload.path.read_bytes())
                for tries in range(1, MAX_TRIES + 1):
                    sent = time.perf_counter()
                    status, retry_after, payload = client.post(body, content_type)
                    ms = (time.perf_counter() - sent) * 1000
                    with lock:
                        requests.append(
                            Request(upload.number, upload.pages, status, ms, sent - origin)
                        )
                    if (
                        status != 429
                        or tries == MAX_TRIES
                        or stop.wait(retry_after_seconds(retry_after))
                    ):
                        break
                run_id = json.loads(payload)["run_id"] if status == 202 else None
                with lock:
                    outcomes.append(Outcome(upload, status, run_id, tries))
        finally:
            client.close()

    threads = [
        threading.Thread(target=client_loop, args=(i,), daemon=True, name=f"client-{i}")
        for i in range(clients)
    ]
    for thread in threads:
        thread.start()
    start.wait(timeout=60)
    for thread in threads:
        while thread.is_alive():
            thread.join(timeout=0.5)  # short joins: Ctrl-C reaches the main thread
    return requests, outcomes


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
    restarts_late = 0
    if chaos is not None and chaos.restarts < chaos.kills:
        time.sleep(3)  # the supervisor restarts a worker that died young after a pause
        restarts_late = len(stage_worker_pids(supervisor.pid)) - sum(s.concurrency for s in STAGES)
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
        "restarts_late": max(restarts_late, 0),
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
    work = stage_work(accepted_ids, {spec.name: spec.concurrency for spec in STAGES})
    drain = span_seconds(result["origin_at"], runs["last_finished"])
    samples = result["sampler"].samples
    chaos: Chaos | None = result["chaos"]
    final_status = Counter(o.status for o in outcomes)
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
        "upload_seconds": result["upload_seconds"],
        "drain_seconds": drain,
        "drain_ideal_seconds": work["drain_ideal_seconds"],
        "slowest_stage": work["slowest_stage"],
        "stage_work": work["stages"],
        "attempt_outcomes": work["attempt_outcomes"],
        "retries": work["retries"],
        "lag_max_seconds": max((s.db_lag_s for s in samples), default=0.0),
        "queued_max": max((s.queued for s in samples), default=0),
        "throughput_max_per_s": max((s.throughput for s in samples), default=0.0),
        "lag_zero_after_seconds": result["lag_zero_after"],
        "worker_restarts": (chaos.restarts + result["restarts_late"]) if chaos else 0,
        "worker_kills": chaos.kills if chaos else 0,
        "redis_flushes": chaos.flushes if chaos else 0,
        "provider_outage_seconds": round(chaos.outage_seconds, 1) if chaos else 0.0,
        "sampler_errors": result["sampler"].errors,
        "gunicorn_slots": slots,
        "small_max_pages": SMALL_MAX_PAGES,
        "large_min_pages": LARGE_MIN_PAGES,
    }
    return out


def criteria(f: dict, chaos_on: bool) -> list[tuple[str, bool, str]]:
    ratio = f["accept_p99_ms_large"] / f["accept_p99_ms_small"] if f["accept_p99_ms_small"] else 0
    drain_ratio = (
        f["drain_seconds"] / f["drain_ideal_seconds"]
        if f["drain_seconds"] and f["drain_ideal_seconds"]
        else float("inf")
    )
    rows = [
        (
            "every accepted run ended",
            f["terminal"] == f["accepted"] and not f["unfinished"],
            f"{f['terminal']}/{f['accepted']} ended",
        ),
        ("zero duplicate chunks", f["duplicate_chunks"] == 0, str(f["duplicate_chunks"])),
        ("zero double charges", f["double_charges"] == 0, str(f["double_charges"])),
        (
            "zero quota overshoot",
            f["quota_overshoot"] == 0 and f["quota_overshoot_max_sampled"] == 0,
            f"end {f['quota_overshoot']}, max sampled {f['quota_overshoot_max_sampled']}",
        ),
        (
            "no 5xx (nor dropped connections)",
            f["server_errors"] == 0 and f["transport_errors"] == 0,
            f"5xx {f['server_errors']}, dropped {f['transport_errors']}",
        ),
        (
            f"accept p99 < {TARGETS['accept_p99_ms']:.0f} ms",
            f["accept_p99_ms"] < TARGETS["accept_p99_ms"],
            f"{f['accept_p99_ms']:.0f} ms",
        ),
        (
            f"large p99 <= {TARGETS['large_over_small']}x small",
            0 < ratio <= TARGETS["large_over_small"],
            f"{f['accept_p99_ms_large']:.0f} / {f['accept_p99_ms_small']:.0f} ms = {ratio:.2f}",
        ),
        (
            "lag back to zero",
            f["lag_zero_after_seconds"] is not None,
            "never"
            if f["lag_zero_after_seconds"] is None
            else f"{f['lag_zero_after_seconds']:.1f} s after the last run ended",
        ),
        (
            f"drain <= {TARGETS['drain_over_ideal']}x ideal",
            drain_ratio <= TARGETS["drain_over_ideal"],
            f"{f['drain_seconds'] or 0:.0f} / {f['drain_ideal_seconds']:.0f} s = {drain_ratio:.2f}",
        ),
    ]
    if chaos_on:
        rows.append(
            (
                "chaos as asked (kills, each restarted, one flush, an outage)",
                f["worker_kills"] > 0
                and f["worker_restarts"] >= f["worker_kills"]
                and f["redis_flushes"] == 1
                and f["provider_outage_seconds"] > 0,
                f"kills {f['worker_kills']}, restarts {f['worker_restarts']}, flushes "
                f"{f['redis_flushes']}, outage {f['provider_outage_seconds']:.0f} s",
            )
        )
    return rows


def _num(value, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def print_report(f: dict, checks: list, explain: list[str]) -> None:
    rows = [
        ["uploads / accepted", f"{f['uploads']} / {f['accepted']}"],
        ["refused (429 responses)", str(f["refused"])],
        ["over quota at accept (402)", str(f["over_quota_at_accept"])],
        ["HTTP statuses (every send)", " ".join(f"{k}x{v}" for k, v in f["http_statuses"].items())],
        ["terminal", str(f["terminal"])],
        ["by status", " ".join(f"{k}x{v}" for k, v in sorted(f["by_status"].items()))],
        ["failed by error", " ".join(f"{k}x{v}" for k, v in sorted(f["failed_by_error"].items()))],
        ["duplicate chunks", str(f["duplicate_chunks"])],
        ["double charges", str(f["double_charges"])],
        ["pages charged / charge mismatches", f"{f['pages_charged']} / {f['charge_mismatches']}"],
        ["quota overshoot (end / max sampled)",
         f"{f['quota_overshoot']} / {f['quota_overshoot_max_sampled']}"],
        ["server errors (5xx) / dropped", f"{f['server_errors']} / {f['transport_errors']}"],
        ["accept p50 / p99 / max ms",
         f"{_num(f['accept_p50_ms'])} / {_num(f['accept_p99_ms'])} / {_num(f['accept_max_ms'])}"],
        [f"accept p99 small (<= {SMALL_MAX_PAGES} p, n={f['accepted_small']}) ms",
         _num(f["accept_p99_ms_small"])],
        [f"accept p99 large (>= {LARGE_MIN_PAGES} p, n={f['accepted_large']}) ms",
         _num(f["accept_p99_ms_large"])],
        ["uploads sent in s", _num(f["upload_seconds"], 1)],
        ["drain s / ideal s (slowest stage)",
         f"{_num(f['drain_seconds'], 1)} / {_num(f['drain_ideal_seconds'], 1)} "
         f"({f['slowest_stage']})"],
        ["work s / workers per stage", "  ".join(
            f"{name} {w['work_s']:.0f}/{w['workers']}" for name, w in f["stage_work"].items())],
        ["stage attempts by outcome",
         " ".join(f"{k}x{v}" for k, v in sorted(f["attempt_outcomes"].items()))],
        ["retries (attempts after a stage's first)", str(f["retries"])],
        ["queue lag max s / jobs queued max", f"{f['lag_max_seconds']:.1f} / {f['queued_max']}"],
        ["throughput max runs/s", f"{f['throughput_max_per_s']:.1f}"],
        ["worker kills / restarts", f"{f['worker_kills']} / {f['worker_restarts']}"],
        ["Redis flushes / provider outage s",
         f"{f['redis_flushes']} / {f['provider_outage_seconds']:.0f}"],
    ]  # fmt: skip
    print()
    print_table(["figure", "value"], rows)
    print()
    print_table(
        ["criterion", "result", "measured"],
        [[name, "PASS" if ok else "FAIL", detail] for name, ok, detail in checks],
    )
    print()
    for line in explain:
        print(f"- {line}")


def write_chart(path: Path, result: dict, f: dict, title: str) -> None:
    samples = result["sampler"].samples
    chaos: Chaos | None = result["chaos"]
    marks = Marks()
    if chaos is not None:
        events = {e.what: e.t for e in chaos.events if e.what in ("outage_start", "outage_end")}
        if "outage_start" in events:
            end = events.get("outage_end", samples[-1].t if samples else events["outage_start"])
            marks.spans.append((events["outage_start"], end, "embedding provider answers 503"))
        for event in chaos.events:
            if event.what == "kill":
                marks.lines.append((event.t, f"SIGKILL stage worker {event.detail}", "#c92a2a"))
            elif event.what == "flush":
                marks.lines.append((event.t, "FLUSHDB of the workers' Redis db", "#5f3dc4"))
    panels = [
        Panel(
            "Queue lag",
            Series("oldest due run, s (database)", [(s.t, s.db_lag_s) for s in samples]),
            Series("jobs waiting in RQ queues", [(s.t, s.queued) for s in samples]),
        ),
        Panel(
            "Throughput",
            Series("runs ended per second", [(s.t, s.throughput) for s in samples]),
            Series("runs in flight", [(s.t, s.active) for s in samples]),
        ),
    ]
    notes = [
        "Red lines: a stage worker SIGKILLed; purple: the workers' Redis db flushed; "
        "orange band: the embedding provider answering 503.",
        f"{f['accepted']} of {f['uploads']} uploads accepted; drain "
        f"{_num(f['drain_seconds'], 1)} s against an ideal of "
        f"{_num(f['drain_ideal_seconds'], 1)} s; accept p99 {_num(f['accept_p99_ms'])} ms.",
    ]
    path.write_text(chart_page(title, panels, marks, notes))


# --- Main -------------------------------------------------------------------------------


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
    parser.add_argument("--chart", type=Path, help="write the HTML chart here")
    parser.add_argument("--url", help="measure a running stack (with --token)")
    parser.add_argument("--token", help="API token for --url")
    parser.add_argument("--keep", action="store_true", help="leave the stack running")
    parser.add_argument("--timeout", type=float, default=1200, help="seconds to wait for runs")
    parser.add_argument("--web-workers", type=int, default=3, help="gunicorn processes")
    parser.add_argument("--web-threads", type=int, default=2, help="threads per process")
    parser.add_argument("--seed", type=int, default=9, help="of the documents and the chaos")
    args = parser.parse_args()
    if args.n < 1 or args.clients < 1 or args.kill_every < 0 or args.timeout <= 0:
        parser.error("-n and --clients must be positive, --kill-every >= 0, --timeout > 0")
    if bool(args.url) != bool(args.token):
        parser.error("--url and --token go together")
    if args.url and urlsplit(args.url).hostname not in ("127.0.0.1", "localhost"):
        parser.error("--url must be on 127.0.0.1: this bench sends traffic nowhere else")

    print(f"Scratch directory {SCRATCH}; database {BENCH_DB}, Redis {BENCH_REDIS_URL}")
    started = time.monotonic()
    slots = args.web_workers * args.web_threads
    processes: list[tuple[subprocess.Popen, float]] = []
    flag = SCRATCH / "embed-outage"
    worker_log = SCRATCH / "run_workers.log"
    supervisor = None
    base = args.url or ""
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
            )
            fresh_database(env)
            tokens, org_ids = organisations(uploads)
            web, base = start_gunicorn(
                env, args.web_workers, args.web_threads, SCRATCH / "gunicorn.log"
            )
            processes.append((web, 10))
            supervisor = start_run_workers(env, worker_log)
            processes.append((supervisor, 60))
            wait_workers(supervisor)
            warm_up(base, tokens["north"], supervisor, worker_log)
        print(
            f"{len(uploads)} documents ready ({time.monotonic() - started:.0f} s); "
            f"bursting from {args.clients} clients to {base}"
        )
        result = burst(args, base, tokens, uploads, org_ids, supervisor, flag)
        f = figures(args, result, org_ids, slots)
        chaos_on = result["chaos"] is not None
        checks = criteria(f, chaos_on)
        f["criteria"] = {name: {"pass": ok, "measured": d} for name, ok, d in checks}
        explain = [
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
            f"small = at most {SMALL_MAX_PAGES} pages, large = at least {LARGE_MIN_PAGES} pages; "
            "accept latency is per 202 response, send to whole answer.",
            "drain = first upload sent to the last accepted run's end; ideal = for the "
            "slowest stage, the sum of its successful attempts' durations / its workers (work "
            "lost to kills, retries and waits for leases or backoff are not in it).",
            "tight organisation: limit 40% of the pages sent to it, so 402s at accept and "
            "'quota_exceeded' failures at extraction are expected, not errors.",
        ]
        if not args.url:
            explain.append(
                f"run_workers log: {worker_log} ({log_problems(worker_log)} warning/error lines, "
                "most from the chaos)"
            )
        if result["unfinished"]:
            explain.append(f"GAVE UP after {args.timeout:.0f} s: not ended {result['unfinished']}")
        print_report(f, checks, explain)
        if args.json:
            data = {k: v for k, v in f.items()}
            data["samples"] = [s.__dict__ for s in result["sampler"].samples]
            if result["chaos"] is not None:
                data["events"] = [e.__dict__ for e in result["chaos"].events]
            args.json.write_text(json.dumps(data, indent=2, default=str))
            print(f"JSON written to {args.json}")
        if args.chart:
            title = f"Burst: {f['uploads']} uploads from {args.clients} clients"
            write_chart(args.chart, result, f, title + (" under chaos" if chaos_on else ""))
            print(f"Chart written to {args.chart}")
        print(f"Total bench time {time.monotonic() - started:.0f} s")
        return 0 if all(ok for _, ok, _ in checks) else 1
    finally:
        flag.unlink(missing_ok=True)
        if args.keep and processes:
            groups = " ".join(f"-{process.pid}" for process, _ in processes)
            print(f"Left running (--keep): API {base}; stop with: kill -TERM -- {groups}")
        else:
            for process, grace in reversed(processes):
                stop_group(process, grace=grace)


if __name__ == "__main__":
    sys.exit(main())
