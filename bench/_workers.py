"""The pipeline under measurement: `manage.py run_workers`, its stages, waiting on its runs."""

import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

from _cpu import CpuMeter
from _http import UploadClient

from core.redis import redis_connection
from pipeline.models import ImportRun, RunStatus
from pipeline.stage_list import STAGES
from tests.support.files import make_pdf
from tests.support.pipeline import poll, runs_not_ended
from tests.support.processes import run_workers_process

POLL_SECONDS = 0.2
WARMUP_TIMEOUT = 120.0
START_TIMEOUT = 60.0


def stage_order() -> list[str]:
    return [spec.name for spec in STAGES]


def transitions() -> list[str]:
    order = stage_order()
    return [f"{a}>{b}" for a, b in zip(order, order[1:], strict=False)]


def stage_worker_count() -> int:
    return sum(spec.concurrency + spec.bulk_concurrency for spec in STAGES)


@contextmanager
def running_workers(env: dict[str, str], log_path: Path):
    """`manage.py run_workers` with the bench environment and default concurrency,
    logging to `log_path`; stopped (and its process group killed) at the end."""
    with (
        open(log_path, "wb") as log,
        run_workers_process(env=env, stdout=log, stop_timeout=60) as process,
    ):
        yield process


def log_problems(log_path: Path) -> int:
    """Warning, error and traceback lines in a run_workers log."""
    text = log_path.read_text(errors="replace")
    words = ("WARNING", "ERROR", "Traceback")
    return sum(1 for line in text.splitlines() if any(word in line for word in words))


def wait_workers(supervisor: subprocess.Popen, *, suspended: bool = False) -> None:
    """Wait until every stage worker is registered (and, if asked, reports `suspended`)."""
    expected = stage_worker_count()
    connection = redis_connection()
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        keys = connection.smembers("rq:workers")
        ready = len(keys) >= expected
        if ready and suspended:
            with connection.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.hget(key, "state")
                ready = all(state == b"suspended" for state in pipe.execute())
        if ready:
            return
        if supervisor.poll() is not None:
            raise RuntimeError("run_workers exited while starting")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{expected} RQ workers not ready after {START_TIMEOUT:.0f} s")
        time.sleep(POLL_SECONDS)


def warm_up(base: str, token: str, supervisor: subprocess.Popen, log_path: Path) -> None:
    """Send one document through every stage, so first-job costs stay out of the figures."""
    client = UploadClient(base, token)
    status, run_id = client.upload("warm-up.pdf", make_pdf(1))
    client.close()
    if run_id is None:
        raise RuntimeError(f"warm-up upload failed with HTTP {status}")
    if runs_not_ended([run_id]) and wait_terminal([run_id], WARMUP_TIMEOUT, supervisor):
        raise RuntimeError(f"warm-up run did not finish; see {log_path}")
    state = ImportRun.objects.get(id=run_id).status
    if state != RunStatus.SUCCEEDED:
        raise RuntimeError(f"warm-up run ended {state}; see {log_path}")


def wait_terminal(
    run_ids: list[str],
    timeout: float,
    supervisor: subprocess.Popen,
    meter: CpuMeter | None = None,
) -> dict[str, int]:
    """Poll until every run has ended; returns {status/stage: count} of those that did not."""

    def ended() -> bool:
        if meter is not None:
            meter.sample()
        return not runs_not_ended(run_ids)

    poll(ended, timeout=timeout, interval=POLL_SECONDS, alive=lambda: supervisor.poll() is None)
    return runs_not_ended(run_ids)
