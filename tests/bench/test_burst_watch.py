"""The burst's watchers: queue lengths per stage, stage workers found through /proc,
and the chaos against a real `run_workers`."""

import os
import signal
import subprocess
import sys
import time

import pytest
from rq import Queue

from bench._burst_watch import Chaos, ChaosPlan, queue_lengths, stage_worker_pids
from bench._procs import is_stage_worker
from tests.support.pipeline import running_workers, wait_for


def test_queue_lengths_sum_every_queue_of_a_stage(redis_conn):
    for name, jobs in (("extract", 2), ("extract-bulk", 1), ("embed", 1)):
        queue = Queue(name, connection=redis_conn)
        for number in range(jobs):
            queue.enqueue("pipeline.engine.execute_stage", f"run-{number}", name)
    # The list a worker moves a job to while taking it is not a queue of waiting jobs.
    redis_conn.rpush("rq:queue:embed:intermediate", "taken")
    redis_conn.sadd("rq:queues", "rq:queue:embed:intermediate")

    assert queue_lengths(redis_conn) == {
        "create": 0,
        "embed": 1,
        "extract": 3,
        "ocr": 0,
        "settle": 0,
        "store": 0,
    }


PARENT = """
import subprocess, sys, time
sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
worker = subprocess.Popen(sleep + ["stage_worker", "extract"])
other = subprocess.Popen(sleep + ["rq_scheduler"])
print(worker.pid, other.pid, flush=True)
time.sleep(60)
"""


def test_stage_workers_are_the_supervisors_stage_worker_children():
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        worker, _other = (int(pid) for pid in parent.stdout.readline().split())
        assert stage_worker_pids(parent.pid) == {worker}
        assert stage_worker_pids(worker) == set()
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_chaos_kills_workers_that_come_back_flushes_once_and_ends_the_outage(redis_conn, tmp_path):
    flag = tmp_path / "outage"
    redis_conn.set("marker", "1")
    plan = ChaosPlan(kill_every=1.0, outage_seconds=1.5, outage_at=0.0, flush_at=0.0)
    with running_workers(concurrency="extract=1,ocr=1,embed=1") as supervisor:
        # One worker for each of the six stages.
        wait_for(lambda: len(stage_worker_pids(supervisor.pid)) == 6, timeout=60, what="workers")
        chaos = Chaos(
            plan,
            supervisor_pid=supervisor.pid,
            redis=redis_conn,
            outage_flag=flag,
            progress=lambda: 1.0,
            origin=time.monotonic(),
            timeout=60,
        )
        chaos.start()
        wait_for(lambda: flag.exists(), timeout=10, what="the outage")
        wait_for(lambda: chaos.kills >= 2, timeout=30, what="two workers killed")
        chaos.stop()
        chaos.await_restarts(timeout=35)

    assert chaos.restarts == chaos.kills >= 2
    assert chaos.flushes == 1
    assert redis_conn.get("marker") is None
    assert not flag.exists()
    assert 1.5 <= chaos.outage_seconds < 10
    kinds = [event.what for event in chaos.events]
    assert kinds.count("flush") == 1
    assert kinds.index("outage_start") < kinds.index("outage_end")


def test_stage_workers_are_told_by_their_command_line_or_rqs_title():
    assert is_stage_worker("/usr/bin/python manage.py stage_worker extract --prefers bulk")
    assert is_stage_worker("rq:worker:vm.4242.extract: Listening on extract.interactive.0")
    assert not is_stage_worker("/usr/bin/python manage.py sweep --loop")
    assert not is_stage_worker("rq:worker:vm.4242.webhooks: Listening on webhooks")
    assert not is_stage_worker("/usr/bin/python manage.py webhook_worker")
    assert not is_stage_worker("python -c from multiprocessing.forkserver import main")
