"""The burst's verdict and pictures: issue 9's criteria, the printed tables, the chart."""

import math
from pathlib import Path

from _burst_corpus import LARGE_MIN_PAGES, SMALL_MAX_PAGES
from _burst_watch import Chaos
from _chart import Marks, Panel, Series, chart_page, chart_svg
from _common import print_table

TARGETS = {"accept_p99_ms": 250.0, "large_over_small": 1.5, "drain_over_ideal": 1.3}


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
            f"{_num(f['accept_p99_ms_large'])} / {_num(f['accept_p99_ms_small'])} ms = "
            f"{_num(ratio, 2)}",
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
    return "-" if value is None or math.isnan(value) else f"{value:.{digits}f}"


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
        ["accept in gunicorn p50 / p99 ms (the rest: waiting for a slot)",
         f"{_num(f['accept_server_p50_ms'])} / {_num(f['accept_server_p99_ms'])}"],
        ["uploads accepted per gunicorn process",
         " / ".join(map(str, f["accepted_per_web_process"])) or "-"],
        [f"accept p99 small (<= {SMALL_MAX_PAGES} p, n={f['accepted_small']}) ms",
         _num(f["accept_p99_ms_small"])],
        [f"accept p99 large (>= {LARGE_MIN_PAGES} p, n={f['accepted_large']}) ms",
         _num(f["accept_p99_ms_large"])],
        ["uploads sent in s", _num(f["upload_seconds"], 1)],
        ["drain s / ideal s (the larger bound)",
         f"{_num(f['drain_seconds'], 1)} / {_num(f['drain_ideal_seconds'], 1)} "
         f"({f['slowest_stage']})"],
        ["ideal: slowest stage's work / workers; all stages' CPU / cores",
         f"{_num(f['drain_ideal_wall_seconds'], 1)} s; {_num(f['drain_ideal_cpu_seconds'], 1)} s"],
        ["drain to 99% of runs ended s", _num(f["drain_p99_seconds"], 1)],
        ["work s / workers per stage", "  ".join(
            f"{name} {w['work_s']:.0f}/{w['workers']}" for name, w in f["stage_work"].items())],
        ["lost s per stage (failed tries; killed: until noticed)", "  ".join(
            f"{name} {w['lost_s']:.0f}" for name, w in f["stage_work"].items())],
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
                marks.ticks.append((event.t, f"SIGKILL stage worker {event.detail}", "#c92a2a"))
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
        "Red ticks above a plot: a stage worker SIGKILLed; purple line: the workers' Redis db "
        "flushed; "
        "orange band: the embedding provider answering 503.",
        f"{f['accepted']} of {f['uploads']} uploads accepted; drain "
        f"{_num(f['drain_seconds'], 1)} s against an ideal of "
        f"{_num(f['drain_ideal_seconds'], 1)} s; accept p99 {_num(f['accept_p99_ms'])} ms.",
    ]
    # A .svg path gets the bare picture (for the README), anything else the HTML page.
    if path.suffix == ".svg":
        path.write_text(chart_svg(panels, marks))
    else:
        path.write_text(chart_page(title, panels, marks, notes))
