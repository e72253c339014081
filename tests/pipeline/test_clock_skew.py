"""Hosts' clocks differ: a stage made due now is claimed by a worker whose clock is behind
the writer's; only a retry's time is read from the claiming host's clock."""

from datetime import timedelta

import pytest
from django.utils import timezone

from pipeline.engine import execute_stage
from pipeline.models import ImportRun, RunSource
from pipeline.services import workers
from pipeline.services.people import run_cancel, run_retry
from pipeline.services.take_back import run_abandon_expired
from pipeline.services.transitions import Actor
from pipeline.services.workers import Failure, run_claim, run_record_failure, run_release
from pipeline.stage_list import first_stage
from tests.support.files import make_pdf
from tests.support.folders import local_folder_fixtures, sync, write
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)

FIRST = first_stage(RunSource.API)
# Far longer than a hand-off takes here, even on a busy machine.
SKEW = timedelta(seconds=1)
REAL_NOW = timezone.now

_fast_settle, folder, connection = local_folder_fixtures("scans")


def clock_off(monkeypatch, by: timedelta) -> None:
    """From here on this process reads the time `by` off the clock that wrote the run, as
    a worker on another host would."""
    monkeypatch.setattr(timezone, "now", lambda: REAL_NOW() + by)


def claim(run: ImportRun, stage: str, job_id: str = "job-late"):
    return run_claim(run_id=run.id, stage=stage, job_id=job_id, worker=f"host.2.{stage}")


def accepted(request, api) -> tuple[ImportRun, str]:
    return accepted_run(api, make_pdf(1)), FIRST


def completed(request, api) -> tuple[ImportRun, str]:
    run = accepted_run(api, make_pdf(1))
    assert execute_stage(str(run.id), FIRST)["outcome"] == "succeeded"
    # The stage after extract (OCR, passed over for a page with text: embed).
    return run, ImportRun.objects.get(id=run.id).stage


def released(request, api) -> tuple[ImportRun, str]:
    run = accepted_run(api, make_pdf(1))
    run_release(claim=claim(run, FIRST, "job-1"), reason="worker stopped")
    return run, FIRST


def taken_back(request, api) -> tuple[ImportRun, str]:
    run = accepted_run(api, make_pdf(1))
    claim(run, FIRST, "job-1")
    ImportRun.objects.filter(id=run.id).update(lease_expires_at=REAL_NOW() - SKEW)
    assert run_abandon_expired(run_id=run.id) is not None
    return run, FIRST


def retried(request, api) -> tuple[ImportRun, str]:
    run = accepted_run(api, make_pdf(1))
    run_cancel(run=run, actor=Actor("test"))
    run_retry(run=ImportRun.objects.get(id=run.id), actor=Actor("test"))
    return run, FIRST


def found(request, api) -> tuple[ImportRun, str]:
    write(request.getfixturevalue("folder"), "a.pdf", make_pdf(1))
    connection = request.getfixturevalue("connection")
    (run_id,) = sync(connection).counts.run_ids + sync(connection).counts.run_ids
    return ImportRun.objects.get(id=run_id), first_stage(RunSource.CONNECTOR)


HAND_OFFS = [accepted, completed, released, taken_back, retried, found]


@pytest.mark.parametrize("hand_off", HAND_OFFS, ids=lambda f: f.__name__)
def test_a_stage_made_due_now_is_claimed_by_a_worker_whose_clock_is_behind(
    request, api, monkeypatch, hand_off
):
    run, stage = hand_off(request, api)

    clock_off(monkeypatch, -SKEW)
    taken = claim(run, stage)

    assert taken is not None, f"{stage} of a run {hand_off.__name__} was dropped"
    assert ImportRun.objects.get(id=run.id).lease_owner == taken.owner


def test_an_upload_goes_through_workers_each_further_behind_than_the_last(api, monkeypatch):
    run = accepted_run(api, make_pdf(2))

    for behind, stage in enumerate(["extract", "embed", "settle"], start=1):
        clock_off(monkeypatch, -behind * SKEW)
        assert execute_stage(str(run.id), stage)["outcome"] == "succeeded", stage

    assert ImportRun.objects.get(id=run.id).status == "succeeded"


def test_a_retry_waits_for_its_time_by_the_claiming_hosts_clock(api, monkeypatch):
    monkeypatch.setattr(workers, "backoff_seconds", lambda **_: 30.0)
    run = accepted_run(api, make_pdf(1))
    failed = run_record_failure(
        claim=claim(run, FIRST, "job-1"),
        outcome="transient_error",
        code="transient_error",
        message="A temporary problem.",
        failure=Failure(detail="provider answered 503"),
        permanent=False,
    )
    assert failed.status == "processing" and failed.due_at > REAL_NOW()

    assert claim(run, FIRST, "job-2") is None
    clock_off(monkeypatch, -SKEW)
    assert claim(run, FIRST, "job-3") is None
    clock_off(monkeypatch, timedelta(seconds=31))
    assert claim(run, FIRST, "job-4") is not None
