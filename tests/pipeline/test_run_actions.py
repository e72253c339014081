"""Cancel and retry, through the API (members and integrations use the same services)."""

import pytest

from pipeline.dispatch import stage_job_id
from pipeline.engine import execute_stage
from pipeline.models import ImportRun, StageAttempt
from pipeline.services import people
from tests.support.files import make_pdf
from tests.support.lanes import waiting_job_ids
from tests.support.runs import drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)


def test_cancel_stops_a_queued_run_and_releases_its_pages(api, org):
    run = accepted_run(api, make_pdf(4))

    response = api.post(f"/api/v1/runs/{run.id}/cancel")

    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert execute_stage(str(run.id), "extract")["outcome"] == "skipped"
    org.refresh_from_db()
    assert org.pages_reserved == 0
    again = api.post(f"/api/v1/runs/{run.id}/cancel")
    assert again.status_code == 200


def test_an_ended_run_cannot_be_cancelled(api):
    run = drive(accepted_run(api, make_pdf(1)).id)

    response = api.post(f"/api/v1/runs/{run.id}/cancel")

    assert response.status_code == 409
    assert "already ended" in response.json()["detail"]


def test_retry_resumes_a_cancelled_run_and_holds_its_pages_again(api, org):
    run = accepted_run(api, make_pdf(3))
    api.post(f"/api/v1/runs/{run.id}/cancel")

    response = api.post(f"/api/v1/runs/{run.id}/retry")

    assert response.status_code == 200
    assert response.json()["status"] == "queued"
    org.refresh_from_db()
    assert org.pages_reserved == 3
    assert drive(run.id).status == "succeeded"
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (3, 0)


def test_retry_is_refused_when_the_pages_no_longer_fit(api, org):
    run = accepted_run(api, make_pdf(3))
    api.post(f"/api/v1/runs/{run.id}/cancel")
    org.page_limit = 2
    org.save(update_fields=["page_limit"])

    response = api.post(f"/api/v1/runs/{run.id}/retry")

    assert response.status_code == 402
    assert ImportRun.objects.get(id=run.id).status == "cancelled"


def test_another_organisation_cannot_cancel_or_retry(api, other_api):
    run = accepted_run(api, make_pdf(1))

    assert other_api.post(f"/api/v1/runs/{run.id}/cancel").status_code == 404
    assert other_api.post(f"/api/v1/runs/{run.id}/retry").status_code == 404
    assert ImportRun.objects.get(id=run.id).status == "queued"


def test_an_operator_retry_of_a_dead_letter_run_finishes_it(api, org, settings):
    settings.PAPERLANE_EMBEDDER = "tests.support.embedders.AlwaysBusyEmbedder"
    settings.PAPERLANE_RETRY_MAX_ATTEMPTS = 1
    run = drive(accepted_run(api, make_pdf(2)).id)
    assert run.status == "dead_letter"
    org.refresh_from_db()
    assert org.pages_reserved == 0

    settings.PAPERLANE_EMBEDDER = "retrieval.embedding.HashingEmbedder"
    assert api.post(f"/api/v1/runs/{run.id}/retry").status_code == 200
    # A new generation: the delivery gets a job id RQ has not seen for this run.
    assert waiting_job_ids("embed")[-1] == stage_job_id(
        run_id=run.id, stage="embed", attempt=0, generation=1
    )
    run = drive(run.id)

    assert run.status == "succeeded"
    embed = StageAttempt.objects.filter(run=run, stage="embed").order_by("started_at")
    assert [(a.generation, a.number, a.outcome) for a in embed] == [
        (0, 1, "transient_error"),
        (1, 1, "succeeded"),
    ]
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (2, 0)


def test_a_retry_through_the_api_is_held_to_the_organisations_bound_of_runs(api, org, settings):
    settings.PAPERLANE_ADMISSION_ORGANISATION_BOUND = 2
    cancelled = [accepted_run(api, make_pdf(1)) for _ in range(2)]
    for run in cancelled:
        api.post(f"/api/v1/runs/{run.id}/cancel")
    in_flight = [accepted_run(api, make_pdf(1)) for _ in range(2)]

    refused = api.post(f"/api/v1/runs/{cancelled[0].id}/retry")

    assert refused.status_code == 429, refused.content
    assert int(refused["Retry-After"]) >= 1 and refused.json()["code"] == "busy"
    assert ImportRun.objects.get(id=cancelled[0].id).status == "cancelled"
    org.refresh_from_db()
    assert org.pages_reserved == 2
    api.post(f"/api/v1/runs/{in_flight[0].id}/cancel")
    assert api.post(f"/api/v1/runs/{cancelled[0].id}/retry").status_code == 200


def test_a_retry_racing_uploads_past_the_bound_is_refused_inside_its_transaction(
    api, org, settings, monkeypatch
):
    # Admission's first look finds room; the runs accepted meanwhile fill the bound.
    settings.PAPERLANE_ADMISSION_ORGANISATION_BOUND = 1
    cancelled = accepted_run(api, make_pdf(1))
    api.post(f"/api/v1/runs/{cancelled.id}/cancel")
    accepted_run(api, make_pdf(1))
    monkeypatch.setattr(people, "admission_check", lambda **kwargs: None)

    refused = api.post(f"/api/v1/runs/{cancelled.id}/retry")

    assert refused.status_code == 429
    assert ImportRun.objects.get(id=cancelled.id).status == "cancelled"
    org.refresh_from_db()
    assert org.pages_reserved == 1


def test_a_retry_through_the_api_waits_while_the_pipeline_is_full(api, settings):
    settings.PAPERLANE_ADMISSION_BACKLOG_BOUND = 2
    cancelled = accepted_run(api, make_pdf(1))
    api.post(f"/api/v1/runs/{cancelled.id}/cancel")
    for _ in range(2):
        accepted_run(api, make_pdf(1))

    refused = api.post(f"/api/v1/runs/{cancelled.id}/retry")

    assert refused.status_code == 429 and "busy" in refused.json()["detail"]
    assert ImportRun.objects.get(id=cancelled.id).status == "cancelled"
