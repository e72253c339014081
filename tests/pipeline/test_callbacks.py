"""Stages are chained through RQ's callbacks: a stage job enqueues nothing itself; it
returns what the run waits for next, its `on_success` callback enqueues that, and the
`on_failure` callback of a job that raised delivers what the run is due for."""

import pytest
from rq.job import Job
from rq.queue import Queue

from core.redis import redis_connection
from pipeline import dispatch
from pipeline.broker import get_queue
from pipeline.dispatch import delivery_of, stage_job_id
from pipeline.engine import execute_stage
from pipeline.errors import TransientError
from pipeline.models import ImportRun, RunSource, StageAttempt
from pipeline.queues import all_queue_names
from pipeline.rq_workers import LaneWorker
from pipeline.stage_list import first_stage
from tests.support.files import make_pdf
from tests.support.lanes import scheduled_job_ids, waiting_job_ids
from tests.support.processes import free_port
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)

FIRST = first_stage(RunSource.API)


@pytest.fixture
def enqueues(monkeypatch):
    """Every job RQ is asked to queue or schedule, from wherever it is asked."""
    asked = []
    enqueue_job, schedule_job = Queue.enqueue_job, Queue.schedule_job

    def enqueue_recorded(self, job, *args, **kwargs):
        asked.append(("queued", job.id))
        return enqueue_job(self, job, *args, **kwargs)

    def schedule_recorded(self, job, *args, **kwargs):
        asked.append(("scheduled", job.id))
        return schedule_job(self, job, *args, **kwargs)

    monkeypatch.setattr(Queue, "enqueue_job", enqueue_recorded)
    monkeypatch.setattr(Queue, "schedule_job", schedule_recorded)
    return asked


def the_job(run: ImportRun) -> Job:
    run.refresh_from_db()
    return Job.fetch(dispatch.current_job_id(run), connection=redis_connection())


def test_a_stage_job_enqueues_nothing_and_its_callback_enqueues_the_next_stage(api, enqueues):
    run = accepted_run(api, make_pdf(1))
    job = the_job(run)
    assert job.success_callback is dispatch.on_stage_job_success
    assert job.failure_callback is dispatch.on_stage_job_failure
    enqueues.clear()

    result = execute_stage(str(run.id), FIRST)

    assert enqueues == []  # the job function queued nothing itself
    run.refresh_from_db()
    assert result["next"] == delivery_of(run) and result["next"]["stage"] == "embed"
    dispatch.on_stage_job_success(job, redis_connection(), result)
    following = stage_job_id(run_id=run.id, stage="embed", attempt=0)
    assert enqueues == [("queued", following)]
    assert waiting_job_ids("embed") == [following]
    # The next stage's job is chained the same way.
    next_job = Job.fetch(following, connection=redis_connection())
    assert next_job.success_callback is dispatch.on_stage_job_success


def test_a_retry_is_scheduled_by_the_callback_not_the_job(api, enqueues, monkeypatch):
    run = accepted_run(api, make_pdf(1))
    job = the_job(run)

    def storage_down(document):
        raise TransientError("storage is away", code="storage_unavailable")

    monkeypatch.setattr("pipeline.stages.extract.read_stored", storage_down)
    enqueues.clear()

    result = execute_stage(str(run.id), FIRST)

    assert result["outcome"] == "transient_error" and enqueues == []
    assert result["next"]["at"] is not None  # due again after a backoff
    dispatch.on_stage_job_success(job, redis_connection(), result)
    retry = stage_job_id(run_id=run.id, stage=FIRST, attempt=1)
    assert enqueues == [("scheduled", retry)] and scheduled_job_ids(FIRST) == [retry]


def test_a_stage_that_ends_the_run_returns_nothing_to_deliver(api, enqueues):
    run = accepted_run(api, make_pdf(1))
    for stage in ("extract", "embed"):
        job = the_job(run)
        dispatch.on_stage_job_success(job, redis_connection(), execute_stage(str(run.id), stage))
    enqueues.clear()

    result = execute_stage(str(run.id), "settle")

    assert (result["outcome"], result["next"]) == ("succeeded", None) and enqueues == []


def test_a_job_that_raised_has_what_its_run_is_due_for_delivered(api, enqueues):
    run = accepted_run(api, make_pdf(1))
    job = the_job(run)
    # As a worker being stopped leaves it: the stage given back, due again now.
    ImportRun.objects.filter(id=run.id).update(stage_attempts=1)
    redis_connection().flushdb()
    enqueues.clear()

    dispatch.on_stage_job_failure(job, redis_connection(), SystemExit, SystemExit(), None)

    again = stage_job_id(run_id=run.id, stage=FIRST, attempt=1)
    assert enqueues == [("queued", again)] and waiting_job_ids(FIRST) == [again]


def test_a_failure_callback_leaves_a_run_another_worker_holds_or_that_ended(api, enqueues):
    held, ended = accepted_run(api, make_pdf(1)), accepted_run(api, make_pdf(1))
    ImportRun.objects.filter(id=held.id).update(lease_owner="job@host.1.extract")
    ImportRun.objects.filter(id=ended.id).update(status="failed")
    jobs = [the_job(held), the_job(ended)]
    enqueues.clear()

    for job in jobs:
        dispatch.on_stage_job_failure(job, redis_connection(), RuntimeError, RuntimeError(), None)

    assert enqueues == []


def test_a_callback_that_cannot_reach_redis_raises_nothing(api, settings):
    run = accepted_run(api, make_pdf(1))
    delivery = delivery_of(run)
    job = Job(id="lost", connection=redis_connection())
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there

    dispatch.on_stage_job_success(job, redis_connection(), {"next": delivery})
    dispatch.on_stage_job_failure(job, redis_connection(), RuntimeError, RuntimeError(), None)


def test_a_real_worker_chains_an_upload_through_every_stage_by_callbacks(api):
    run = accepted_run(api, make_pdf(2))
    queues = [get_queue(name) for name in all_queue_names()]

    LaneWorker(queues, connection=redis_connection()).work(burst=True)

    run.refresh_from_db()
    assert run.status == "succeeded", run.error_message
    stages = StageAttempt.objects.filter(run=run).values_list("stage", "outcome")
    assert list(stages) == [(s, "succeeded") for s in ("extract", "embed", "settle")]
