"""Pipeline throughput and hand-off: real uploads through gunicorn, `manage.py run_workers`.

    .venv/bin/python bench/pipeline.py [--worker-class simple|fork|both] [--small 200]
        [--large 100] [--upload-while-processing] [--paced-rate 4] [--paced-count 40]
        [--quick] [--repeat 1] [--no-floor] [--costs-n 20]

Cost per document (printed first): the floor (bench/floor.py, a bare RQ chain of
five no-op stages with our queues and worker layout) and our pipeline with
SimpleWorker drain the same N one-page PDFs (--small) in turn, --repeat times, in
the same hour; the table gives each one's worker CPU per document, PostgreSQL CPU
per document and docs/s, and ours against the floor's beside the targets (worker
CPU at most 2x the floor's, docs/s at least half). Then bench/stage_costs.py's
table: SQL statements, transactions and CPU per stage, in-process. --quick stops
there (no twenty-page set, no fork workers, no paced case).

Every case below runs per worker class (RQ SimpleWorker, or rq.Worker, which forks a
work horse per job) against a freshly created PostgreSQL database `paperlane_bench`
and an emptied bench Redis db, with its own gunicorn and `run_workers` at default
concurrency, all on 127.0.0.1.

Burst cases, one per document set (N one-page PDFs, M twenty-page PDFs):
- default, "uploaded first": RQ's suspend flag is set and the whole set is uploaded
  through POST /api/v1/documents from a pool of clients while no worker runs. Then
  `run_workers` starts; once every stage worker has registered and reports itself
  suspended and the new processes have gone quiet, the CPU counters are read and the
  flag is cleared. Neither gunicorn's upload work nor the workers' start-up falls in
  the measurement. docs/s = succeeded runs / (first attempt start to last run finish).
- --upload-while-processing (the original mode): `run_workers` starts, one warm-up
  document goes through, then the set is uploaded while the workers process it.
  docs/s = succeeded runs / (first upload sent to last run finish).

Paced case: with the workers running and warmed up by one document, P one-page PDFs
are uploaded one at a time at R per second, well below capacity, so no stage has a
backlog: the hand-off is then the dispatch latency of the chaining itself (stage
commit -> the job's on_success callback enqueues the next stage -> the next worker claims).

Timings come from the database (ImportRun, StageAttempt with its cpu_ms), CPU time
of processes from /proc, and RQ's `enqueued_at` of each stage job, which must be read
while the job exists: jobs are enqueued with result_ttl=0, so RQ deletes a job as
soon as it succeeds (see EnqueueWatcher in bench/_enqueue_watcher.py). The footer
printed at the end (bench/_pipeline_report.py) defines every column. Targets:
hand-off median under 20 ms; efficiency at least 0.8 on the twenty-page set.
"""

import argparse
import shutil
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import django.db
from _common import (
    SCRATCH,
    bench_env,
    fresh_database,
    median,
    organisation_with_token,
    print_table,
)
from _cpu import CORES, CpuMeter, machine_load, wait_quiet
from _enqueue_watcher import EnqueueWatcher
from _http import upload_all, upload_paced
from _pipeline_report import FOOTER, print_burst, print_paced
from _workers import (
    log_problems,
    running_workers,
    stage_order,
    wait_terminal,
    wait_workers,
    warm_up,
)
from django.db import close_old_connections
from django.db.models import Count, Max
from floor import run_floor
from rq.suspension import resume, suspend
from stage_costs import stage_costs

from core.redis import redis_connection
from pipeline.models import ImportRun, RunStatus, StageAttempt
from tests.support.files import make_pdf
from tests.support.processes import free_port, start_web_server

WORKER_CLASSES = {"simple": "rq.worker.SimpleWorker", "fork": "rq.Worker"}


# --- Figures -------------------------------------------------------------------------------


def _ms(delta) -> float:
    return delta.total_seconds() * 1000


def analyse(run_ids: list[str], enqueued: dict[str, datetime], first_upload=None) -> dict:
    """Figures for one measured set from its ImportRun and StageAttempt rows.

    `first_upload` starts the docs/s window when given (uploads overlapped the
    processing); otherwise the window starts at the first attempt.
    """
    ok_outcome = StageAttempt.Outcome.SUCCEEDED
    order = stage_order()
    runs = ImportRun.objects.filter(id__in=run_ids)
    by_status = dict(runs.values_list("status").annotate(n=Count("id")))
    succeeded = by_status.get(RunStatus.SUCCEEDED, 0)
    last_finished = runs.aggregate(m=Max("finished_at"))["m"]
    latency = [
        _ms(finished - created)
        for created, finished in runs.filter(status=RunStatus.SUCCEEDED).values_list(
            "created_at", "finished_at"
        )
    ]
    attempts = list(
        StageAttempt.objects.filter(run_id__in=run_ids).values(
            "run_id",
            "generation",
            "stage",
            "outcome",
            "started_at",
            "finished_at",
            "cpu_ms",
            "job_id",
            "error_message",
        )
    )
    done = [a for a in attempts if a["finished_at"] is not None]
    ok = [a for a in done if a["outcome"] == ok_outcome]
    not_ok = [a for a in attempts if a["outcome"] != ok_outcome]

    # Hand-off: the previous stage's successful attempt finishing -> the next stage's
    # first attempt starting, within one run and one delivery generation.
    per_run: dict = defaultdict(lambda: defaultdict(list))
    for a in attempts:
        per_run[a["run_id"], a["generation"]][a["stage"]].append(a)
    handoffs: dict[str, list[float]] = defaultdict(list)
    to_enqueue: list[float] = []
    queue_wait: list[float] = []
    for stages in per_run.values():
        for before, after in zip(order, order[1:], strict=False):
            prev = next((a for a in stages[before] if a["outcome"] == ok_outcome), None)
            if prev is None or not stages[after]:
                continue
            nxt = min(stages[after], key=lambda a: a["started_at"])
            handoffs[f"{before}>{after}"].append(_ms(nxt["started_at"] - prev["finished_at"]))
            at = enqueued.get(nxt["job_id"])
            if at is not None:
                to_enqueue.append(_ms(at - prev["finished_at"]))
                queue_wait.append(_ms(nxt["started_at"] - at))

    def per_stage(pairs) -> dict[str, float]:
        pairs = list(pairs)
        return {stage: median([v for s, v in pairs if s == stage]) for stage in order}

    first_start = min((a["started_at"] for a in done), default=None)
    last_end = max((a["finished_at"] for a in done), default=None)
    span = (last_end - first_start).total_seconds() if done else float("nan")
    start = first_upload or first_start
    elapsed = (last_finished - start).total_seconds() if last_finished and start else float("nan")
    handoff_all = [x for values in handoffs.values() for x in values]
    return {
        "runs": len(run_ids),
        "by_status": by_status,
        "succeeded": succeeded,
        "docs_per_s": succeeded / elapsed if elapsed else float("nan"),
        "elapsed": elapsed,
        "latency": latency,
        "handoffs": handoffs,
        "handoff_all": handoff_all,
        "to_enqueue": to_enqueue,
        "queue_wait": queue_wait,
        "split_covered": f"{len(to_enqueue)}/{len(handoff_all)}",
        "body": per_stage((a["stage"], _ms(a["finished_at"] - a["started_at"])) for a in ok),
        "body_cpu": per_stage((a["stage"], a["cpu_ms"]) for a in ok if a["cpu_ms"] is not None),
        "span": span,
        "wall_s": sum(_ms(a["finished_at"] - a["started_at"]) for a in done) / 1000,
        "cpu_s": sum(a["cpu_ms"] or 0 for a in done) / 1000,
        "cpu_missing": sum(1 for a in done if a["cpu_ms"] is None),
        "not_ok": not_ok,
    }


# --- Cases ---------------------------------------------------------------------------------


def prepare(worker_class: str, label: str, scratch: Path) -> tuple[dict[str, str], str, Path]:
    """A fresh database and Redis db, an organisation; returns env, API token, log path."""
    media = scratch / f"media-{worker_class}-{label}"
    media.mkdir()
    env = bench_env(
        str(media), PAPERLANE_WORKER_CLASS=WORKER_CLASSES[worker_class], LOG_LEVEL="WARNING"
    )
    fresh_database(env)
    token = organisation_with_token(env, "bench", pages=10_000_000)
    return env, token, scratch / f"run_workers-{worker_class}-{label}.log"


def run_burst(
    worker_class: str, pdfs: list[bytes], args, scratch: Path, label: str = "", watch: bool = True
) -> dict:
    """Process one document set in one of the two upload modes; figures for the table.
    `watch`: read the jobs' enqueue times from Redis for the hand-off split (a cost run
    does not: the polling would load the system it measures)."""
    env, token, log_path = prepare(worker_class, f"{len(pdfs)}{label}", scratch)
    watched = stage_order()[1:]  # the first stage's jobs are no hand-off's
    with start_web_server(port=free_port(), env=env, workers=args.web_workers, threads=1) as base:
        if args.upload_while_processing:
            with running_workers(env, log_path) as supervisor:
                wait_workers(supervisor)
                warm_up(base, token, supervisor, log_path)
                meter = CpuMeter(supervisor.pid)
                meter.start()
                with EnqueueWatcher(watched, enabled=watch) as watcher:
                    run_ids, statuses, first_upload, upload_s = upload_all(
                        base, token, pdfs, args.clients
                    )
                    unfinished = wait_terminal(run_ids, args.timeout, supervisor, meter)
                meter.sample(final=True)
        else:
            first_upload = None
            suspend(redis_connection())
            try:
                run_ids, statuses, _, upload_s = upload_all(base, token, pdfs, args.clients)
                with running_workers(env, log_path) as supervisor:
                    wait_workers(supervisor, suspended=True)
                    meter = CpuMeter(supervisor.pid)
                    wait_quiet(meter)
                    with EnqueueWatcher(watched, enabled=watch) as watcher:
                        meter.start()
                        resume(redis_connection())
                        unfinished = wait_terminal(run_ids, args.timeout, supervisor, meter)
                    meter.sample(final=True)
            finally:
                resume(redis_connection())

    close_old_connections()
    result = analyse(run_ids, watcher.enqueued, first_upload)
    span_cores = result["span"] * CORES
    result.update(
        worker_class=worker_class,
        from_upload=first_upload is not None,
        statuses=statuses,
        upload_s=upload_s,
        unfinished=unfinished,
        cpu_workers=meter.seconds("workers"),
        cpu_aux=meter.seconds("aux"),
        cpu_web=meter.seconds("web"),
        cpu_pg=meter.seconds("pg"),
        cpu_isolated=meter.seconds("isolated"),
        cpu_rest=meter.machine_busy_seconds
        - sum(meter.seconds(kind) for kind in ("workers", "isolated", "aux", "web", "pg"))
        - meter.own,
        cpu_own=meter.own,
        cpu_watcher=watcher.cpu_seconds,
        pg_sessions=meter.sessions_end - meter.sessions_start,
        cpu_window=meter.window,
        eff_wall=result["wall_s"] / span_cores,
        eff_body_cpu=result["cpu_s"] / span_cores,
        eff_proc_cpu=meter.seconds("workers") / span_cores,
        machine_busy=meter.machine_busy,
        log_path=log_path,
        log_problems=log_problems(log_path),
    )
    return result


def run_paced(worker_class: str, args, scratch: Path) -> dict:
    """Upload one-page PDFs at a steady rate to warm, idle workers; hand-off figures."""
    env, token, log_path = prepare(worker_class, "paced", scratch)
    pdfs = [make_pdf(1, label=f"Paced {i} page") for i in range(args.paced_count)]
    with start_web_server(port=free_port(), env=env, workers=args.web_workers, threads=1) as base:
        with running_workers(env, log_path) as supervisor:
            wait_workers(supervisor)
            warm_up(base, token, supervisor, log_path)
            with EnqueueWatcher(stage_order()[1:]) as watcher:
                run_ids, statuses, sent_s = upload_paced(base, token, pdfs, args.paced_rate)
                unfinished = wait_terminal(run_ids, args.timeout, supervisor)

    close_old_connections()
    result = analyse(run_ids, watcher.enqueued)
    result.update(
        worker_class=worker_class,
        statuses=statuses,
        sent_per_s=(len(pdfs) - 1) / sent_s if sent_s else float("nan"),
        unfinished=unfinished,
        cpu_watcher=watcher.cpu_seconds,
        log_path=log_path,
        log_problems=log_problems(log_path),
    )
    return result


# Targets of issue 9: ours against the floor, from the same run.
CPU_RATIO_TARGET = 2.0
RATE_RATIO_TARGET = 0.5


def cost_figures(r: dict) -> dict:
    """Our burst result as per-document figures comparable with the floor's."""
    n = r["succeeded"] or float("nan")
    return {
        "name": "ours",
        "n": r["runs"],
        "docs_per_s": r["docs_per_s"],
        "cpu_ms_per_doc": r["cpu_workers"] * 1000 / n,
        "isolated_ms_per_doc": r["cpu_isolated"] * 1000 / n,
        "pg_ms_per_doc": r["cpu_pg"] * 1000 / n,
        "machine_busy": r["machine_busy"],
    }


def run_costs(pdfs: list[bytes], args, scratch: Path) -> list[tuple[dict, dict]]:
    """The floor and ours on the same documents, --repeat times in turn: (floor, ours)."""
    pairs = []
    for number in range(1, args.repeat + 1):
        floor = run_floor(len(pdfs))
        ours = run_burst("simple", pdfs, args, scratch, label=f"-cost{number}", watch=False)
        print_burst(f"Pipeline (cost run): {len(pdfs)} one-page PDFs, SimpleWorker", [ours])
        pairs.append((floor, cost_figures(ours)))
    return pairs


def print_costs(pairs: list[tuple[dict, dict]]) -> None:
    headers = [
        "run",
        "who",
        "worker CPU ms/doc",
        "isolated ms/doc",
        "PG CPU ms/doc",
        "docs/s",
        "cpu busy",
        f"CPU x floor (<= {CPU_RATIO_TARGET:g})",
        f"docs/s x floor (>= {RATE_RATIO_TARGET:g})",
    ]
    rows = []
    for number, (floor, ours) in enumerate(pairs, 1):
        cpu_ratio = ours["cpu_ms_per_doc"] / floor["cpu_ms_per_doc"]
        rate_ratio = ours["docs_per_s"] / floor["docs_per_s"]
        for r, ratios in ((floor, ("", "")), (ours, (cpu_ratio, rate_ratio))):
            rows.append(
                [
                    str(number),
                    r["name"],
                    f"{r['cpu_ms_per_doc']:.1f}",
                    f"{r.get('isolated_ms_per_doc', 0.0):.1f}",
                    f"{r['pg_ms_per_doc']:.1f}",
                    f"{r['docs_per_s']:.1f}",
                    f"{r['machine_busy']:.2f}",
                    *[
                        _ratio(x, target, high)
                        for x, target, high in zip(
                            ratios,
                            (CPU_RATIO_TARGET, RATE_RATIO_TARGET),
                            (True, False),
                            strict=True,
                        )
                    ],
                ]
            )
    if len(pairs) > 1:
        cpu = median([o["cpu_ms_per_doc"] / f["cpu_ms_per_doc"] for f, o in pairs])
        rate = median([o["docs_per_s"] / f["docs_per_s"] for f, o in pairs])
        rows.append(
            [
                "median",
                "ours/floor",
                "",
                "",
                "",
                "",
                "",
                _ratio(cpu, CPU_RATIO_TARGET, True),
                _ratio(rate, RATE_RATIO_TARGET, False),
            ]
        )
    n = pairs[0][0]["n"]
    print(f"\nCost per document: {n} one-page PDFs, ours beside the floor, {CORES} cores\n")
    print_table(headers, rows)
    print(
        "  worker CPU: user+system of the stage worker processes in the drain window / docs;"
        " isolated: the extraction children and the fork server run_workers starts for"
        " them before the window (ours only, not in worker CPU); PG: live backends of the"
        " bench database; floor: bench/floor.py (bare RQ, no-op stages)."
    )


def _ratio(value, target: float, at_most: bool) -> str:
    if value == "":
        return ""
    met = value <= target if at_most else value >= target
    return f"{value:.2f} {'ok' if met else 'MISSED'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker-class", choices=["simple", "fork", "both"], default="both")
    parser.add_argument("--small", type=int, default=200, help="one-page PDFs")
    parser.add_argument("--large", type=int, default=100, help="twenty-page PDFs")
    parser.add_argument("--clients", type=int, default=8, help="concurrent upload clients")
    parser.add_argument("--web-workers", type=int, default=3, help="gunicorn worker processes")
    parser.add_argument("--timeout", type=float, default=900, help="seconds to wait per set")
    parser.add_argument(
        "--upload-while-processing",
        action="store_true",
        help="upload each burst set while the workers run (default: upload it first)",
    )
    parser.add_argument(
        "--paced-rate", type=float, default=4.0, help="paced one-page uploads per second"
    )
    parser.add_argument(
        "--paced-count", type=int, default=40, help="paced one-page uploads (0: skip)"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="only the cost comparison and the stage costs (no large set, fork, paced)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="floor/ours pairs in the cost run")
    parser.add_argument("--no-floor", action="store_true", help="skip the cost comparison")
    parser.add_argument(
        "--costs-n", type=int, default=20, help="documents for the stage costs (0: skip)"
    )
    args = parser.parse_args()
    if args.paced_rate <= 0:
        parser.error("--paced-rate must be positive")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.quick:
        args.large, args.paced_count = 0, 0

    scratch = SCRATCH
    print(f"Machine before the bench: {machine_load()}, {CORES} cores")
    classes = ["simple", "fork"] if args.worker_class == "both" else [args.worker_class]
    sets = []
    small = [make_pdf(1, label=f"Doc {i} page") for i in range(args.small)]
    if args.small > 0 and not args.quick:
        sets.append((f"{args.small} one-page PDFs", small))
    if args.large > 0:
        pdfs = [make_pdf(20, label=f"Doc {i} page") for i in range(args.large)]
        sets.append((f"{args.large} twenty-page PDFs", pdfs))
    mode = (
        f"uploaded while processing by {args.clients} clients"
        if args.upload_while_processing
        else f"uploaded first by {args.clients} clients, then the workers started"
    )
    started = time.monotonic()
    try:
        if args.small > 0 and not args.no_floor:
            print_costs(run_costs(small, args, scratch))
        if args.costs_n > 0:
            stage_costs(args.costs_n)
        for title, pdfs in sets:
            results = [run_burst(worker_class, pdfs, args, scratch) for worker_class in classes]
            print_burst(f"Pipeline: {title}, {mode}, {CORES} cores", results)
        if args.paced_count > 0:
            results = [run_paced(worker_class, args, scratch) for worker_class in classes]
            print_paced(
                f"Hand-off at a steady pace: {args.paced_count} one-page PDFs at "
                f"{args.paced_rate:g}/s, 1 client, {CORES} cores",
                results,
            )
    finally:
        django.db.connections.close_all()
        for path in scratch.iterdir():
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
        print(f"\nrun_workers logs are in {scratch}")
    print(FOOTER)
    print(f"\nMachine after the bench: {machine_load()}")
    print(f"Total bench time {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
