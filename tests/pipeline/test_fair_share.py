"""Fair share of the extract workers (pipeline/fair_share.py): what a worker may take, on
real PostgreSQL and Redis. With real worker processes: test_fair_share_workers.py."""

import pytest
from rq.job import Job

from core.redis import redis_connection
from pipeline.dispatch import EXECUTE
from pipeline.fair_share import HEAVY_PAGES, Share, heavy_cap
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
