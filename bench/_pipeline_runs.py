"""One set of documents through the whole stack, measured: a fresh bench database,
gunicorn and `run_workers`, the set uploaded (first, or while the workers run), and
the figures of its runs (`analyse`). Used by bench/pipeline.py and bench/extract.py."""

from collections import defaultdict
from datetime import datetime
from pathlib import Path

from _common import bench_env, fresh_database, median, organisation_with_token
from _cpu import CORES, CpuMeter, wait_quiet
from _enqueue_watcher import EnqueueWatcher
from _http import upload_all
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
from rq.suspension import resume, suspend

from core.redis import redis_connection
from pipeline.models import ImportRun, RunStatus, StageAttempt
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
