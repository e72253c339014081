"""Run the real pipeline processes (run_workers) against the test database."""

import time
from contextlib import contextmanager

from django.db import close_old_connections

from jobs.models import TERMINAL_STATUSES, ImportRun
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
def running_workers(*, concurrency: str = "extract=1,embed=1", **env: str):
    """`manage.py run_workers` with the test settings (and `env`), stopped at the end."""
    environment = process_env(**{**TEST_PIPELINE_ENV, **env})
    with run_workers_process(env=environment, args=("--concurrency", concurrency)) as process:
        yield process


def wait_for(predicate, *, timeout: float, interval: float = 0.2, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        close_old_connections()
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def wait_terminal(run_ids, *, timeout: float) -> dict:
    run_ids = list(run_ids)

    def done():
        runs = {r.id: r for r in ImportRun.objects.filter(id__in=run_ids)}
        if all(r.status in TERMINAL_STATUSES for r in runs.values()) and len(runs) == len(run_ids):
            return runs
        return None

    return wait_for(done, timeout=timeout, what=f"{len(run_ids)} runs to end")
