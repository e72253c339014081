"""Run the real pipeline processes (run_workers) against the test database, and wait on runs.

Shared by the tests and the benchmarks (bench/).
"""

import time
from collections.abc import Callable
from contextlib import contextmanager, suppress

from django.db import close_old_connections
from django.db.models import Count

from pipeline.models import TERMINAL_STATUSES, ImportRun
from tests.support.processes import process_env, run_workers_process

# Fast failure detection for tests; the defaults are in config/settings.py.
TEST_PIPELINE_ENV = {
    "PAPERLANE_LEASE_SECONDS": "6",
    "PAPERLANE_SWEEP_INTERVAL_SECONDS": "1",
    "PAPERLANE_REDELIVER_AFTER_SECONDS": "10",
    "PAPERLANE_RETRY_BASE_SECONDS": "0.5",
    "PAPERLANE_RETRY_CAP_SECONDS": "4",
    "PAPERLANE_SHUTDOWN_GRACE_SECONDS": "10",
    "LOG_LEVEL": "WARNING",
}


@contextmanager
def running_workers(*, concurrency: str = "extract=1,ocr=1,embed=1,webhooks=0", **env: str):
    """`manage.py run_workers` with the test settings (and `env`), stopped at the end."""
    environment = process_env(**{**TEST_PIPELINE_ENV, **env})
    with run_workers_process(env=environment, args=("--concurrency", concurrency)) as process:
        yield process


def poll(predicate: Callable, *, timeout: float, interval: float = 0.2, alive=None):
    """Call `predicate` until it returns something true, `timeout` passes or `alive()`
    turns false; returns its last value."""
    deadline = time.monotonic() + timeout
    while True:
        # A fresh snapshot for a predicate reading the database; none in a test without
        # database access (pytest-django refuses even the check, with RuntimeError, once
        # an earlier test of this process left its connection open).
        with suppress(RuntimeError):
            close_old_connections()
        value = predicate()
        if value or time.monotonic() > deadline or (alive is not None and not alive()):
            return value
        time.sleep(interval)


def wait_for(predicate: Callable, *, timeout: float, interval: float = 0.2, what: str = "it"):
    value = poll(predicate, timeout=timeout, interval=interval)
    if not value:
        raise AssertionError(f"timed out after {timeout}s waiting for {what}")
    return value


def runs_not_ended(run_ids) -> dict[str, int]:
    """{"status/stage": count} of the runs among `run_ids` that have not ended."""
    active = ImportRun.objects.filter(id__in=list(run_ids)).exclude(status__in=TERMINAL_STATUSES)
    rows = active.values("status", "stage").annotate(n=Count("id"))
    return {f"{r['status']}/{r['stage']}": r["n"] for r in rows}


def wait_terminal(run_ids, *, timeout: float) -> dict:
    """Wait until every run has ended; returns them by id."""
    run_ids = list(run_ids)
    wait_for(lambda: not runs_not_ended(run_ids), timeout=timeout, what=f"{len(run_ids)} runs")
    return {r.id: r for r in ImportRun.objects.filter(id__in=run_ids)}
