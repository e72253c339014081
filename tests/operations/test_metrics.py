"""/metrics: Prometheus text for staff or the metrics token, never for anyone else; the
same numbers as the dashboard; counters that move as documents flow."""

import re
import time

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from core.upload_counts import upload_count, upload_counts
from operations.stats.snapshot import pipeline_snapshot
from pipeline.dispatch import enqueue_current
from pipeline.models import ImportRun
from tests.support.files import HTML_AS_PDF, make_pdf
from tests.support.lanes import lane_of, waiting_count
from tests.support.runs import drive, unchecked_run
from tests.support.uploads import accepted_run, upload

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "metrics-token-7f3a9c"


@pytest.fixture
def token(settings) -> str:
    settings.PAPERLANE_METRICS_TOKEN = TOKEN
    return TOKEN


def scrape(client: Client | None = None, *, token: str | None = None) -> dict[tuple, float]:
    """{(sample name, sorted labels): value} of one scrape, which must parse."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = (client or Client()).get("/metrics", headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name: str, **labels) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_anonymous_requests_and_wrong_tokens_get_no_numbers(token, member_client, api):
    anonymous = Client().get("/metrics")
    wrong = Client().get("/metrics", headers={"Authorization": "Bearer metrics-token-7f3a9d"})
    basic = Client().get("/metrics", headers={"Authorization": f"Basic {TOKEN}"})
    member = member_client.get("/metrics")  # signed in, not staff
    integration = api.get("/metrics")  # an organisation's API token is not the metrics token

    assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"].startswith("Bearer")
    for refused in (wrong, basic, member, integration):
        assert refused.status_code == 403
    for refused in (anonymous, wrong, basic, member, integration):
        assert b"paperlane_" not in refused.content


def test_with_no_token_configured_only_staff_get_in(settings, operator):
    settings.PAPERLANE_METRICS_TOKEN = ""

    empty = Client().get("/metrics", headers={"Authorization": "Bearer "})
    staff = operator.get("/metrics")

    assert empty.status_code == 403 and b"paperlane_" not in empty.content
    assert staff.status_code == 200 and b"paperlane_stage_waiting_jobs" in staff.content


def test_the_right_token_and_a_staff_session_get_the_metrics(token, operator):
    by_token = scrape(token=TOKEN)
    by_session = scrape(operator)

    assert value(by_token, "paperlane_redis_up") == 1
    assert by_token.keys() == by_session.keys()


def test_it_reports_the_same_numbers_as_the_dashboard(token, api, org, redis_conn):
    done = drive(accepted_run(api, make_pdf(2)).id)
    accepted_run(api, make_pdf(3))  # enqueued on commit: waits at extract

    samples = scrape(token=TOKEN)
    snapshot = pipeline_snapshot()

    assert done.status == "succeeded"
    for stage in snapshot.stages:
        for metric, field_name in [
            ("paperlane_stage_waiting_jobs", "waiting"),
            ("paperlane_stage_due_runs", "due"),
            ("paperlane_stage_running_runs", "running"),
            ("paperlane_stage_workers", "workers"),
            ("paperlane_stage_stuck_runs", "stuck"),
            ("paperlane_stage_failed_runs_last_hour", "failed_last_hour"),
        ]:
            assert value(samples, metric, stage=stage.name) == getattr(stage, field_name)
        assert value(samples, "paperlane_stage_lag_seconds", stage=stage.name) == pytest.approx(
            stage.lag_seconds or 0, abs=1
        )
    # Both accepts enqueued their extract job; drive() ran the first run's stages directly.
    assert value(samples, "paperlane_stage_waiting_jobs", stage="extract") == 2
    assert waiting_count("extract") == 2
    assert value(samples, "paperlane_organisation_pages_used", organisation="acme") == 2
    assert value(samples, "paperlane_organisation_pages_reserved", organisation="acme") == 3
    assert value(samples, "paperlane_organisation_pages_limit", organisation="acme") == 1000
    assert (
        value(
            samples, "paperlane_stage_duration_last_hour_seconds", stage="extract", quantile="0.5"
        )
        == snapshot.stage("extract").p50_seconds
    )


def test_its_counters_move_as_documents_flow(token, api, org, settings):
    before = scrape(token=TOKEN)
    run = accepted_run(api, make_pdf(4))
    assert upload(api, HTML_AS_PDF, "fake.pdf").status_code == 415
    settings.PAPERLANE_EMBEDDER = "tests.support.embedders.FlakyEmbedder"
    settings.PAPERLANE_RETRY_BASE_SECONDS = 0.01
    assert drive(run.id).status == "succeeded"
    after = scrape(token=TOKEN)

    def moved(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    for stage, times in [("create", 0), ("store", 0), ("extract", 1), ("embed", 1), ("settle", 1)]:
        assert (
            moved("paperlane_stage_attempts_total", stage=stage, outcome="succeeded", code="none")
            == times
        ), stage  # an upload skips create and store
    # The flaky provider said "busy" twice before embed succeeded: two retries.
    failed = dict(stage="embed", outcome="transient_error", code="transient_error")
    assert moved("paperlane_stage_attempts_total", **failed) == 2
    assert moved("paperlane_stage_retries_total", stage="embed") == 2
    assert moved("paperlane_stage_retries_total", stage="extract") == 0
    assert moved("paperlane_stage_duration_seconds_count", stage="embed") == 3
    assert moved("paperlane_stage_duration_seconds_bucket", stage="embed", le="+Inf") == 3
    assert moved("paperlane_stage_duration_seconds_sum", stage="embed") > 0
    assert moved("paperlane_uploads_total", channel="api", result="accepted", code="") == 1
    assert (
        moved("paperlane_uploads_total", channel="api", result="refused", code="unsupported_type")
        == 1
    )
    assert moved("paperlane_organisation_pages_used", organisation="acme") == 4
    # Counters never go down from one scrape to the next.
    for key, number in before.items():
        if key[0].endswith(("_total", "_count", "_bucket", "_sum")):
            assert after.get(key, 0) >= number, key


def test_the_duration_histogram_is_cumulative_up_to_inf(token, org):
    from datetime import timedelta

    from django.utils import timezone

    from pipeline.models import StageAttempt
    from tests.support.runs import unchecked_run

    run = unchecked_run(org, make_pdf(1), kind="pdf", pages=1)
    now = timezone.now()
    for number, seconds in enumerate((0.05, 3, 2000), start=1):
        StageAttempt.objects.create(
            run=run,
            stage="extract",
            number=number,
            outcome="succeeded",
            started_at=now - timedelta(seconds=seconds),
            finished_at=now,
        )

    samples = scrape(token=TOKEN)

    def bucket(le):
        return value(samples, "paperlane_stage_duration_seconds_bucket", stage="extract", le=le)

    assert [bucket(le) for le in ("0.1", "2.5", "5.0", "1800.0", "+Inf")] == [1, 1, 2, 2, 3]
    assert value(samples, "paperlane_stage_duration_seconds_count", stage="extract") == 3
    assert value(samples, "paperlane_stage_duration_seconds_sum", stage="extract") == (
        pytest.approx(2003.05)
    )


def test_uploads_are_counted_at_the_api_and_the_upload_page(api, member_client, redis_conn):
    assert upload(api, make_pdf(1), "a.pdf", **{"Idempotency-Key": "k1"}).status_code == 202
    assert upload(api, make_pdf(1), "a.pdf", **{"Idempotency-Key": "k1"}).status_code == 202
    assert upload(api, b"", "empty.pdf").status_code in (400, 415)
    page = member_client.post("/", {"file": _file("b.pdf", make_pdf(1, label="Web"))})
    again = member_client.post("/", {"file": _file("b-again.pdf", make_pdf(1, label="Web"))})
    refused = member_client.post("/", {"file": _file("c.pdf", HTML_AS_PDF)})
    empty_form = member_client.post("/", {})

    counts = upload_counts(connection=redis_conn)

    assert page.status_code == again.status_code == 302
    assert refused.status_code == 415 and empty_form.status_code == 400
    assert counts[("api", "accepted", "")] == 1
    assert counts[("api", "replayed", "")] == 1
    assert (
        sum(
            n
            for (channel, result, _), n in counts.items()
            if (channel, result) == ("api", "refused")
        )
        == 1
    )
    assert counts[("web", "accepted", "")] == 1
    assert counts[("web", "duplicate", "")] == 1
    assert counts[("web", "refused", "unsupported_type")] == 1
    assert counts[("web", "refused", "missing_file")] == 1


def _file(name, data):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data)


def test_counting_never_holds_up_an_upload_when_redis_is_silent(silent_redis):
    started = time.monotonic()
    upload_count(channel="api", result="accepted")
    first = time.monotonic() - started
    started = time.monotonic()
    for _ in range(100):
        upload_count(channel="api", result="accepted")
    rest = time.monotonic() - started

    assert first < 0.5  # one short timeout
    assert rest < 0.05  # then counting pauses instead of waiting again


def test_lanes_are_summed_per_stage_and_shown_per_priority(token, org, other_org, redis_conn):
    interactive = [unchecked_run(o, make_pdf(1), kind="pdf", pages=1) for o in (org, other_org)]
    bulk = unchecked_run(org, make_pdf(1), kind="pdf", pages=1)
    ImportRun.objects.filter(id=bulk.id).update(priority="bulk")
    bulk.refresh_from_db()
    for run in [*interactive, bulk]:
        assert enqueue_current(run)

    samples = scrape(token=TOKEN)

    # Two organisations: two interactive lanes; the bulk run: a bulk lane.
    assert len({lane_of(f"run-{r.id}-0-extract-0").name for r in [*interactive, bulk]}) == 3
    assert value(samples, "paperlane_stage_waiting_jobs", stage="extract") == 3
    assert (
        value(samples, "paperlane_queue_waiting_jobs", stage="extract", priority="interactive") == 2
    )
    assert value(samples, "paperlane_queue_waiting_jobs", stage="extract", priority="bulk") == 1
    assert value(samples, "paperlane_queue_waiting_jobs", stage="store", priority="bulk") == 0
    [interactive_stats, bulk_stats] = pipeline_snapshot().stage("extract").priorities
    assert (interactive_stats.waiting, bulk_stats.waiting) == (2, 1)


def test_the_metric_names_are_documented(token):
    text = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").content.decode()

    names = set(re.findall(r"^# HELP (\S+) ", text, re.M))

    assert {
        "paperlane_stage_waiting_jobs",
        "paperlane_queue_waiting_jobs",
        "paperlane_queue_lag_seconds",
        "paperlane_stage_running_runs",
        "paperlane_stage_lag_seconds",
        "paperlane_stage_attempts_total",
        "paperlane_stage_retries_total",
        "paperlane_stage_duration_seconds",
        "paperlane_uploads_total",
        "paperlane_organisation_pages_used",
        "paperlane_organisation_pages_reserved",
    } <= names
