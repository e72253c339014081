"""The sweeper against the real test database and Redis, one pass at a time."""

from datetime import timedelta

import pytest
from django.utils import timezone

from documents.models import QuotaReservation
from jobs.dispatch import stage_job_id
from jobs.models import ImportRun, StageAttempt
from jobs.queues import get_queue, redis_connection
from jobs.services.workers import run_claim
from jobs.sweeper import sweep_once
from tests.support.files import make_pdf
from tests.support.processes import free_port
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)


def upload(api) -> ImportRun:
    return accepted_run(api, make_pdf(2))


def age(run: ImportRun, seconds: int = 5) -> None:
    ImportRun.objects.filter(id=run.id).update(
        updated_at=timezone.now() - timedelta(seconds=seconds)
    )


def test_it_redelivers_a_due_stage_whose_job_redis_lost(api):
    run = upload(api)
    redis_connection().flushdb()
    age(run)

    assert sweep_once().redelivered == 1
    assert get_queue("create").job_ids == [stage_job_id(run_id=run.id, stage="create", attempt=0)]
    assert sweep_once().redelivered == 0  # the job is waiting now


def test_it_leaves_a_job_that_is_waiting_in_a_long_queue(api):
    run = upload(api)
    age(run, seconds=3600)

    assert sweep_once().redelivered == 0


def test_it_redelivers_a_scheduled_retry_at_its_time(api):
    run = upload(api)
    due = timezone.now() + timedelta(seconds=30)
    ImportRun.objects.filter(id=run.id).update(due_at=due, status="processing")
    redis_connection().flushdb()
    age(run)

    assert sweep_once().redelivered == 1
    scheduled = get_queue("create").scheduled_job_registry.get_job_ids()
    assert scheduled == [stage_job_id(run_id=run.id, stage="create", attempt=0)]


def test_an_expired_lease_is_recorded_as_abandoned_and_made_due_again(api, settings):
    run = upload(api)
    claim = run_claim(run_id=run.id, stage="create", job_id="job-1", worker="host.1.create")
    ImportRun.objects.filter(id=run.id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )

    report = sweep_once()

    assert report.abandoned == 1
    run.refresh_from_db()
    assert (run.lease_owner, run.crashes, run.status) == ("", 1, "processing")
    assert StageAttempt.objects.get(id=claim.attempt.id).outcome == "abandoned"
    assert "stopped responding" in run.error_message


def test_a_stage_that_keeps_losing_its_worker_becomes_dead_letter(api, settings):
    settings.PAPERLANE_POISON_CRASHES = 2
    run = upload(api)
    for n in (1, 2):
        run_claim(run_id=run.id, stage="create", job_id=f"job-{n}", worker="host.1.create")
        ImportRun.objects.filter(id=run.id).update(
            lease_expires_at=timezone.now() - timedelta(seconds=1)
        )
        sweep_once()

    run.refresh_from_db()
    assert (run.status, run.error_code) == ("dead_letter", "poison")
    assert QuotaReservation.objects.get(run=run).status == "released"


def test_a_live_lease_is_left_alone(api):
    run = upload(api)
    run_claim(run_id=run.id, stage="create", job_id="job-1", worker="host.1.create")

    assert sweep_once().abandoned == 0
    run.refresh_from_db()
    assert run.lease_owner.startswith("job-1@")


def test_it_releases_pages_held_by_a_run_that_ended_without_settling(api, org):
    run = upload(api)
    ImportRun.objects.filter(id=run.id).update(status="failed")

    assert sweep_once().released == 1
    org.refresh_from_db()
    assert org.pages_reserved == 0


def test_an_upload_is_accepted_while_redis_is_down_and_delivered_later(api, settings):
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/15"  # nothing listens there
    run = accepted_run(api, make_pdf(1))

    settings.REDIS_URL = "redis://127.0.0.1:6379/15"
    age(run)
    assert sweep_once().redelivered == 1
    assert get_queue("create").job_ids == [stage_job_id(run_id=run.id, stage="create", attempt=0)]


def test_a_retry_left_scheduled_long_after_its_time_is_delivered_now(api, settings):
    settings.PAPERLANE_REDELIVER_AFTER_SECONDS = 10
    run = upload(api)
    redis_connection().flushdb()
    past = timezone.now() - timedelta(seconds=30)
    ImportRun.objects.filter(id=run.id).update(due_at=past, status="processing")
    job_id = stage_job_id(run_id=run.id, stage="create", attempt=0)
    get_queue("create").enqueue_at(
        past, "jobs.engine.execute_stage", str(run.id), "create", job_id=job_id
    )
    age(run)

    assert sweep_once().redelivered == 1
    assert get_queue("create").job_ids == [job_id]
