"""The tables bench/pipeline.py prints, and the footer that defines their columns."""

from collections.abc import Callable

from _common import format_counts, median, percentile, print_table
from _cpu import CORES
from _enqueue_watcher import WATCH_INTERVAL
from _workers import stage_order, transitions


def _pair(values: list[float]) -> str:
    return f"{median(values):.1f}/{percentile(values, 95):.1f}" if values else "-"


def _problems(r: dict) -> None:
    name = r["worker_class"]
    if r["unfinished"]:
        print(f"  {name}: NOT FINISHED in time: {r['unfinished']}")
    for a in r["not_ok"][:5]:
        print(
            f"  {name}: attempt {a['stage']} of run {a['run_id']} "
            f"{a['outcome']}: {a['error_message'][:200]}"
        )
    if r["log_problems"]:
        print(f"  {name}: {r['log_problems']} warning/error lines in {r['log_path']}")


def _print_results(
    title: str,
    results: list[dict],
    rate: tuple[str, str],
    columns: dict[str, Callable[[dict], str]],
    note: Callable[[dict], str],
) -> None:
    """`title`, a table with one row per worker class, then each row's note and problems.

    The columns are worker, ok/n, the `rate` (header, result key), hand-off overall and
    per transition, then `columns` (header -> cell of a result), then not ok.
    """
    rate_header, rate_key = rate
    headers = [
        "worker",
        "ok/n",
        rate_header,
        "hand-off p50/p95 ms",
        *transitions(),
        *columns,
        "not ok",
    ]
    rows = [
        [
            r["worker_class"],
            f"{r['succeeded']}/{r['runs']}",
            f"{r[rate_key]:.2f}",
            _pair(r["handoff_all"]),
            *[_pair(r["handoffs"].get(t, [])) for t in transitions()],
            *[cell(r) for cell in columns.values()],
            str(len(r["not_ok"])),
        ]
        for r in results
    ]
    print(f"\n{title}\n")
    print_table(headers, rows)
    for r in results:
        print(f"  {r['worker_class']}: {note(r)}")
        _problems(r)


def print_burst(title: str, results: list[dict]) -> None:
    order = stage_order()
    stages = "/".join(s[:2] for s in order)
    columns = {
        "eff wall": lambda r: f"{r['eff_wall']:.2f}",
        "eff body cpu": lambda r: f"{r['eff_body_cpu']:.2f}",
        "eff proc cpu": lambda r: f"{r['eff_proc_cpu']:.2f}",
        "cpu busy": lambda r: f"{r['machine_busy']:.2f}",
        f"body ms {stages}": lambda r: "/".join(f"{r['body'][s]:.0f}" for s in order),
        f"cpu ms {stages}": lambda r: "/".join(f"{r['body_cpu'][s]:.0f}" for s in order),
    }
    _print_results(title, results, ("docs/s", "docs_per_s"), columns, _burst_note)


def _burst_note(r: dict) -> str:
    window = "first upload" if r["from_upload"] else "first attempt start"
    return "; ".join(
        [
            f"uploads {format_counts(r['statuses'])} in {r['upload_s']:.1f} s",
            f"runs {format_counts(r['by_status'])}",
            f"{r['elapsed']:.1f} s {window} to last run finished",
            f"hand-off = to enqueue {_pair(r['to_enqueue'])} + queue wait "
            f"{_pair(r['queue_wait'])} ms ({r['split_covered']} hand-offs seen in Redis)",
            f"over the {r['span']:.1f} s span: attempt wall {r['wall_s']:.1f} s, body CPU "
            f"{r['cpu_s']:.1f} s ({r['cpu_missing']} attempts without cpu_ms), "
            f"worker processes CPU {r['cpu_workers']:.1f} s",
            f"CPU s in the {r['cpu_window']:.1f} s meter window: "
            f"supervisor+scheduler+sweeper {r['cpu_aux']:.1f}, gunicorn {r['cpu_web']:.1f}, "
            f"PostgreSQL backends (sampled live ones) {r['cpu_pg']:.1f}, "
            f"this bench {r['cpu_own']:.1f} (Redis watcher {r['cpu_watcher']:.1f}), "
            f"rest of machine (Redis, short-lived backends, others) {r['cpu_rest']:.1f}",
            f"{r['pg_sessions']} PostgreSQL sessions opened",
        ]
    )


def print_paced(title: str, results: list[dict]) -> None:
    columns = {
        "to enqueue": lambda r: _pair(r["to_enqueue"]),
        "queue wait": lambda r: _pair(r["queue_wait"]),
        "split seen": lambda r: r["split_covered"],
        "run latency p50/p95 ms": lambda r: _pair(r["latency"]),
    }
    _print_results(title, results, ("sent/s", "sent_per_s"), columns, _paced_note)


def _paced_note(r: dict) -> str:
    return (
        f"uploads {format_counts(r['statuses'])}; "
        f"runs {format_counts(r['by_status'])}; Redis watcher CPU {r['cpu_watcher']:.1f} s"
    )


WATCH_MS = round(WATCH_INTERVAL * 1000)
FOOTER = f"""
Burst tables (one row per worker class):
docs/s        succeeded runs / window. Uploaded first (default): window = first attempt
              started_at -> last run finished_at. --upload-while-processing: window = first
              upload sent -> last run finished_at.
hand-off      next stage's first attempt started_at (taken as its claim begins) - previous
              stage's successful attempt finished_at (taken just before its transaction
              commits), per run and delivery generation; p50/p95 in ms, overall and per
              transition. In a burst it is mostly time waiting behind the backlog.
  split       to enqueue = previous finished_at -> next job's RQ enqueued_at (commit, the
              on_success callback's enqueue of the next stage); queue wait = enqueued_at ->
              next started_at
              (waiting for a free worker, dequeue, fork for rq.Worker, claim). Jobs are kept
              with result_ttl=0, so RQ deletes a job when it succeeds and enqueued_at can
              no longer be read afterwards: the bench polls Redis every {WATCH_MS} ms and
              reads it while the job exists; "seen" counts the hand-offs whose job was caught
              (a sample, biased against the shortest-lived jobs).
eff wall      sum(attempt finished_at - started_at) / (span x {CORES} cores), span = first attempt
              start -> last attempt finish of the measured set (the issue's definition).
              Exceeds 1 when more worker processes than cores share the CPU: a stage waiting
              for the CPU still counts as busy, so this overstates useful work.
eff body cpu  sum(StageAttempt.cpu_ms) / (span x {CORES} cores): CPU time of the stage body's
              own thread and its isolated extraction children up to its completion (claim,
              the completing statement, the stage's own writes and commit, RQ and the
              enqueue are outside it). The honest "time inside stage bodies" figure.
eff proc cpu  user+system CPU of the stage worker processes (forked horses included) from
              /proc/<pid>/stat / (span x {CORES} cores): stage bodies plus everything around
              them in the workers (claim, commit, RQ bookkeeping, enqueues, forks).
cpu busy      share of the whole machine's CPU busy in the meter window (anything running,
              PostgreSQL, Redis, gunicorn, and other users of this machine).
body ms       median attempt duration (wall) per stage, successful attempts.
cpu ms        median StageAttempt.cpu_ms per stage, successful attempts.
not ok        stage attempts of measured runs whose outcome is not succeeded (should be 0).

Paced table: one-page PDFs sent one at a time at --paced-rate to warm, idle workers, so
hand-off is the dispatch latency of the chaining (stage commit -> the job's callback
enqueues -> next worker claims); to enqueue / queue wait as above (p50/p95 ms); run latency
= run created_at -> finished_at of succeeded runs.

Targets: hand-off median under 20 ms; efficiency at least 0.8 on the twenty-page set."""
