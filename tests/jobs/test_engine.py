"""The stage engine in the test process: claims, duplicate deliveries, the history."""

import pytest

from documents.models import UsageEntry
from jobs.engine import execute_stage
from jobs.models import RunTransition, StageAttempt
from jobs.services.history import Actor
from jobs.services.people import run_cancel
from jobs.services.workers import run_claim
from tests.support.files import make_pdf
from tests.support.runs import drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_same_stage_delivered_twice_does_its_work_once(api):
    run = accepted_run(api, make_pdf(2))

    assert execute_stage(str(run.id), "create")["outcome"] == "succeeded"
    assert execute_stage(str(run.id), "create")["outcome"] == "skipped"
    for stage in ("store", "extract", "embed", "settle"):
        assert execute_stage(str(run.id), stage)["outcome"] == "succeeded"
    assert execute_stage(str(run.id), "embed")["outcome"] == "skipped"
    assert execute_stage(str(run.id), "settle")["outcome"] == "skipped"

    assert StageAttempt.objects.filter(run=run).count() == 5
    assert UsageEntry.objects.filter(document=run.document_id).count() == 1


def test_a_stage_that_is_not_due_yet_is_not_claimed(api):
    run = accepted_run(api, make_pdf(1))

    assert execute_stage(str(run.id), "extract")["outcome"] == "skipped"
    assert not StageAttempt.objects.filter(run=run).exists()


def test_the_history_records_every_transition(api):
    run = drive(accepted_run(api, make_pdf(1)).id)

    history = list(RunTransition.objects.filter(run=run).values_list("to_status", "to_stage"))
    assert history == [
        ("queued", "create"),
        ("processing", "create"),
        ("processing", "store"),
        ("processing", "extract"),
        ("processing", "embed"),
        ("processing", "settle"),
        ("succeeded", "settle"),
    ]


def test_cancelling_a_run_mid_stage_closes_its_running_attempt(api):
    run = accepted_run(api, make_pdf(1))
    claim = run_claim(run_id=run.id, stage="create", job_id="job-1", worker="host.1.create")

    run_cancel(run=run, actor=Actor("test"))

    attempt = StageAttempt.objects.get(id=claim.attempt.id)
    assert (attempt.outcome, attempt.error_message) == ("skipped", "the run was cancelled")
