"""run_workers forks its stage workers: a worker (re)starts without a new interpreter."""

import os
import signal
import sys
from pathlib import Path

import pytest
from rq import Worker

from bench._procs import is_stage_worker
from core.redis import redis_connection
from pipeline.supervisor import MANAGE, Forked
from tests.support.pipeline import TEST_PIPELINE_ENV, wait_for
from tests.support.processes import process_env, run_workers_process

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# An interpreter that starts Django and the stages spends over a second of CPU on it.
FORKED_START_CPU_SECONDS = 0.3


def registered_worker_pids() -> dict[int, str]:
    """pid -> stage of the stage workers registered in Redis (names end .<pid>.<stage>)."""
    found = {}
    for worker in Worker.all(connection=redis_connection()):
        *_, pid, stage = worker.name.split(".")
        found[int(pid)] = stage
    return found


def new_worker(stage: str, *, besides: list[int]) -> int:
    """The pid of a worker of `stage` registered besides those (a dead worker stays
    registered until its key expires), once there is one."""

    def found() -> int | None:
        pids = registered_worker_pids().items()
        return next((pid for pid, name in pids if name == stage and pid not in besides), None)

    wait_for(lambda: found() is not None, timeout=30, what=f"a new {stage} worker")
    return found()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_stage_workers_are_forked_and_a_killed_one_comes_back_forked():
    env = process_env(**TEST_PIPELINE_ENV)
    with run_workers_process(
        env=env, args=("--concurrency", "extract=1,ocr=1,embed=1")
    ) as supervisor:
        # create, store, extract, ocr, embed, settle: one each.
        wait_for(lambda: len(registered_worker_pids()) == 6, timeout=60, what="six workers")
        workers = registered_worker_pids()
        for pid in workers:
            assert parent_of(pid) == supervisor.pid
            assert is_stage_worker(Path(f"/proc/{pid}/cmdline").read_text())
        # The extract worker also started its extraction fork server; the rest nothing.
        settle = next(pid for pid, stage in workers.items() if stage == "settle")
        assert cpu_seconds(settle) < FORKED_START_CPU_SECONDS

        os.kill(settle, signal.SIGKILL)
        again = new_worker("settle", besides=[settle])
        assert parent_of(again) == supervisor.pid
        assert cpu_seconds(again) < FORKED_START_CPU_SECONDS


def fork_servers_of(parent: int) -> list[int]:
    """The extraction fork servers (multiprocessing's) whose parent is `parent`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and parent_of(int(entry.name)) == parent:
                if b"multiprocessing.forkserver" in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
        except (FileNotFoundError, ProcessLookupError):
            pass  # gone meanwhile
    return found


def test_extract_workers_share_the_supervisors_fork_server_and_a_new_one_does_too():
    env = process_env(**TEST_PIPELINE_ENV)
    with run_workers_process(
        env=env, args=("--concurrency", "extract=2,ocr=1,embed=1")
    ) as supervisor:
        wait_for(lambda: len(registered_worker_pids()) == 7, timeout=60, what="seven workers")
        # A worker warms up before it registers: the extract workers' warm-ups are done.
        extract = [pid for pid, stage in registered_worker_pids().items() if stage == "extract"]
        assert len(fork_servers_of(supervisor.pid)) == 1
        assert [fork_servers_of(pid) for pid in extract] == [[], []]

        os.kill(extract[0], signal.SIGKILL)
        again = new_worker("extract", besides=extract)
        assert fork_servers_of(again) == []
        assert cpu_seconds(again) < FORKED_START_CPU_SECONDS


def test_a_forked_command_that_fails_exits_with_its_error_code():
    child = Forked([sys.executable, MANAGE, "stage_worker", "no-such-stage"])
    wait_for(lambda: child.poll() is not None, timeout=30, what="the child's exit")

    assert child.returncode == 1
