"""Start real Paperlane processes (web server, workers) against the test database."""

import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def process_env(**extra: str) -> dict[str, str]:
    """Environment for a child process that talks to the same test database and Redis."""
    from django.conf import settings
    from django.db import connection

    db = connection.settings_dict
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATABASE_URL=f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        REDIS_URL=settings.REDIS_URL,
        MEDIA_ROOT=str(settings.MEDIA_ROOT),
        PAPERLANE_LOCAL_FOLDER_ROOTS=",".join(settings.PAPERLANE_LOCAL_FOLDER_ROOTS),
        # The same as the tests': what one encrypts (core/secrets.py) the other reads.
        SECRET_KEY=settings.SECRET_KEY,
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


@contextmanager
def web_server(*, workers: int = 4, threads: int = 1, env: dict[str, str] | None = None):
    """A gunicorn serving the project against the test database; yields its base URL."""
    with start_web_server(
        port=free_port(), env=env or process_env(), workers=workers, threads=threads
    ) as base:
        yield base


@contextmanager
def start_web_server(*, port: int, env: dict[str, str], workers: int, threads: int):
    """A gunicorn serving the project on a loopback port; yields its base URL."""
    command = [
        sys.executable,
        "-m",
        "gunicorn",
        "config.wsgi:application",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        str(workers),
        "--threads",
        str(threads),
        "--backlog",
        "256",
        "--log-level",
        "warning",
    ]
    process = subprocess.Popen(command, cwd=ROOT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{base}/api/v1/openapi.json", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("web server did not start") from None
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


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


@contextmanager
def run_workers_process(
    *, env: dict[str, str], args: tuple[str, ...] = (), stdout=None, stop_timeout: float = 40
):
    """`manage.py run_workers` in its own process group. At the end it gets SIGTERM
    (workers finish or hand back their stage); whatever is left of the group is killed."""
    process = subprocess.Popen(
        [sys.executable, "manage.py", "run_workers", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL if stdout is None else stdout,
        stderr=None if stdout is None else subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        stop_group(process, grace=stop_timeout)


@contextmanager
def stage_worker_process(*stages: str, env: dict[str, str], burst: bool = False, stdout=None):
    """`manage.py stage_worker STAGE…`: one real RQ worker for those stages, no sweeper or
    supervisor (its pid is the worker's). With `burst` it exits once their queues are
    empty; at the end it is stopped (SIGTERM, then SIGKILL) if it has not. `stdout`: a
    file for its output (and errors)."""
    command = [sys.executable, "manage.py", "stage_worker", *stages]
    process = subprocess.Popen(
        command + (["--burst"] if burst else []),
        cwd=ROOT,
        env=env,
        stdout=stdout,
        stderr=None if stdout is None else subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        stop_group(process, grace=10)
