"""An operator's requeue never deletes a job a worker may hold: a real worker process
stopped (SIGSTOP) in the instant after Redis handed it the job and before it marked the
job started, while two requeues race it."""

import os
import signal
import threading

import pytest
from django.db import connection

from core.redis import redis_connection
from pipeline.dispatch import stage_job_id
from pipeline.models import ImportRun, RunTransition, StageAttempt
from pipeline.services.people import run_requeue
from pipeline.services.transitions import Actor
from tests.support.files import make_pdf
from tests.support.lanes import lane_of, waiting_job_ids
from tests.support.pipeline import wait_for
from tests.support.processes import process_env, stage_worker_process
from tests.support.uploads import accepted_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def blocked_in_blpop() -> bool:
    """The worker waits for a job: a connection to the test's Redis database is blocked
    in BLPOP over its lanes (the only worker there)."""
    db = redis_connection().connection_pool.connection_kwargs.get("db", 0)
    return any(
        client.get("db") == str(db) and client.get("cmd") == "blpop" and "b" in client["flags"]
        for client in redis_connection().client_list()
    )


def requeue_twice_at_once(run: ImportRun) -> list[str]:
    notes = []

    def requeue(operator: str):
        try:
            change = run_requeue(run=run, actor=Actor(f"user:{operator}"), reason="looks stuck")
            notes.append((change.changed, change.note))
        finally:
            connection.close()

    threads = [threading.Thread(target=requeue, args=(name,)) for name in ("ann", "bob")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return notes


def test_a_job_a_worker_has_just_taken_is_left_to_it_by_two_racing_requeues(api, org, tmp_path):
    log = tmp_path / "worker.log"
    with (
        open(log, "w") as output,
        stage_worker_process("extract", env=process_env(LOG_LEVEL="INFO"), stdout=output) as worker,
    ):
        wait_for(blocked_in_blpop, timeout=60, what="the worker to wait")
        os.kill(worker.pid, signal.SIGSTOP)
        try:
            # Redis hands the job to the stopped worker's BLPOP at once: out of its lane,
            # still marked queued, and the worker has not marked it started.
            run = accepted_run(api, make_pdf(1))
            job_id = stage_job_id(run_id=run.id, stage="extract", attempt=0)
            lane = lane_of(job_id).name
            wait_for(lambda: waiting_job_ids("extract") == [], timeout=5, what="the pop")
            assert redis_connection().hget(f"rq:job:{job_id}", "status") == b"queued"

            notes = requeue_twice_at_once(run)
        finally:
            os.kill(worker.pid, signal.SIGCONT)

        assert [changed for changed, _ in notes] == [False, False]
        for _, note in notes:
            assert f"queued in {lane} and taken off it by a worker a moment ago" in note
        assert not RunTransition.objects.filter(run=run, reason__contains="requeued").exists()
        # The worker goes on with the job it was handed, once, and RQ finishes it.
        wait_for(
            lambda: ImportRun.objects.filter(id=run.id, stage="embed").exists(),
            timeout=60,
            what="extract to succeed",
        )
        wait_for(
            lambda: not redis_connection().exists(f"rq:job:{job_id}"),
            timeout=30,
            what="RQ to finish the job",
        )
    attempts = StageAttempt.objects.filter(run=run, stage="extract")
    assert list(attempts.values_list("job_id", "outcome")) == [(job_id, "succeeded")]
    assert waiting_job_ids("extract") == []
    output = log.read_text()
    assert "InvalidJobOperation" not in output and "Traceback" not in output, output
