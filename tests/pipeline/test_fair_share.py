"""Fair share of the extract workers (pipeline/fair_share.py): what a worker may take, on
real PostgreSQL and Redis. With real worker processes: test_fair_share_workers.py."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rq.job import Job

from core.redis import redis_connection
from pipeline.dispatch import EXECUTE
from pipeline.fair_share import HEAVY_PAGES, Share, heavy_cap
from pipeline.models import ImportRun
from pipeline.services.take_back import runs_take_back_from_dead_worker
from pipeline.services.transitions import SWEEPER
from tests.support.files import make_pdf
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db


def job(run, stage: str = "extract") -> Job:
    return Job.create(EXECUTE, args=(str(run.id), stage), connection=redis_connection())


def test_with_two_extract_workers_an_organisation_runs_one_heavy_extraction_at_a_time(
    api, other_api
):
    heavy = [accepted_run(api, make_pdf(HEAVY_PAGES), name=f"h{n}.pdf") for n in range(2)]
    light = accepted_run(api, make_pdf(HEAVY_PAGES - 1), name="light.pdf")
    others = accepted_run(other_api, make_pdf(HEAVY_PAGES), name="other.pdf")
    first, second, third = Share(), Share(), Share()
    assert heavy_cap("extract") == 1

    assert first.admits(job(heavy[0]))
    assert not second.admits(job(heavy[1]))
    assert second.admits(job(light))
    assert third.admits(job(others))
    # Only the extract stage is weighed.
    assert Share().admits(job(heavy[1], stage="embed"))

    first.release()
    assert Share().admits(job(heavy[1]))


def test_more_workers_let_an_organisation_run_all_of_them_but_one(api, settings):
    settings.PAPERLANE_STAGE_CONCURRENCY = {"extract": 3}
    heavy = [accepted_run(api, make_pdf(HEAVY_PAGES), name=f"h{n}.pdf") for n in range(3)]

    admitted = [Share().admits(job(run)) for run in heavy]

    assert admitted == [True, True, False]


def test_a_dead_workers_heavy_job_frees_its_place_when_its_stage_is_taken_back(
    api, django_capture_on_commit_callbacks
):
    heavy = [accepted_run(api, make_pdf(HEAVY_PAGES), name=f"h{n}.pdf") for n in range(2)]
    dying = job(heavy[0])
    assert Share().admits(dying)  # the worker that takes it is then SIGKILLed
    ImportRun.objects.filter(id=heavy[0].id).update(
        status="processing",
        lease_owner=f"{dying.id}@vm.4242.extract",
        lease_expires_at=timezone.now() + timedelta(seconds=30),
    )
    assert not Share().admits(job(heavy[1]))

    with django_capture_on_commit_callbacks(execute=True):
        taken = runs_take_back_from_dead_worker(
            worker="vm.4242.", why="its process exited", actor=SWEEPER
        )

    assert taken == 1
    # At once, not once the dead worker's entry ends with the stage's timeout (300 s).
    assert Share().admits(job(heavy[1]))
