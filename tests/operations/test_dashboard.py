"""The pipeline dashboard in the admin: staff only, the numbers, and what it asks attention for."""

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rq.suspension import suspend
from rq.worker import SimpleWorker

from core.provider_breaker import breaker
from core.redis import redis_connection
from pipeline.broker import get_queue
from pipeline.models import ImportRun, StageAttempt
from pipeline.queues import stage_queue_names
from pipeline.stage_list import STAGES
from retrieval.embedding import PROVIDER
from tests.support.files import make_pdf
from tests.support.runs import drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db

URL = "/admin/pipeline/"
# Tests that run stages in-process (tests.support.runs.drive) need real commits.
DRIVES = pytest.mark.django_db(transaction=True)


@pytest.fixture
def workers_for_every_stage(redis_conn):
    """One registered (idle) RQ worker per stage, reading its lanes, as run_workers would have."""
    for spec in STAGES:
        queues = [get_queue(name) for name in stage_queue_names(spec.name)]
        SimpleWorker(queues, connection=redis_connection(), name=f"w-{spec.name}").register_birth()


def attention(html: str) -> dict[str, set]:
    """{kind: {stage or None}} of the dashboard's attention messages."""
    found: dict[str, set] = {}
    section = html.split('id="attention"', 1)[1].split("</section>", 1)[0]
    for attrs in re.findall(r"<li ([^>]*)>", section):
        kind = re.search(r'data-kind="([a-z_]+)"', attrs)[1]
        stage = re.search(r'data-stage="([a-z_]+)"', attrs)
        found.setdefault(kind, set()).add(stage[1] if stage else None)
    return found


def cell(html: str, stage: str, field: str) -> str:
    row = re.search(rf'<tr data-stage="{stage}">(.*?)</tr>', html, re.S)[1]
    return re.search(rf'data-field="{field}"[^>]*>([^<]*)<', row)[1]


def value(html: str, stage: str, field: str) -> str:
    row = re.search(rf'<tr data-stage="{stage}">(.*?)</tr>', html, re.S)[1]
    return re.search(rf'data-field="{field}" data-value="([^"]*)"', row)[1]


def test_anonymous_people_and_members_are_sent_to_the_admin_login(member_client):
    for client in (Client(), member_client):
        response = client.get(URL)
        assert response.status_code == 302
        assert response["Location"].startswith("/admin/login/")


def test_the_admin_index_links_the_dashboard_and_rqs_pages(operator):
    index = operator.get("/admin/").content.decode()

    assert 'href="/admin/pipeline/"' in index
    assert 'href="/admin/django_rq/dashboard/"' in index


@DRIVES
def test_it_shows_each_stages_numbers_in_the_admin(operator, api, org, workers_for_every_stage):
    finished = drive(accepted_run(api, make_pdf(3)).id)
    waiting = accepted_run(api, make_pdf(2))

    response = operator.get(URL)
    html = response.content.decode()

    assert response.status_code == 200
    assert "Pipeline dashboard" in html and 'id="site-name"' in html  # the admin's frame
    assert finished.status == "succeeded"
    # The upload passed every stage once, but create and store, which it skips, and OCR,
    # which a PDF with text passes over.
    for spec in STAGES:
        done = "0" if spec.name in ("create", "store", "ocr") else "1"
        assert value(html, spec.name, "done_60m") == done
        assert value(html, spec.name, "failed_60m") == "0"
    assert cell(html, "extract", "due") == "1"
    assert cell(html, "extract", "workers") == "1"
    assert re.search(r'<tr data-organisation="acme">.*?data-field="pages_used">3<', html, re.S)
    assert re.search(r'data-field="pages_reserved">2<', html)
    assert attention(html) == {"none": {None}}
    assert 'id="throughput-chart"' in html and "<rect" in html and 'id="lag-chart"' in html
    # Times carry seconds, in the site's time zone.
    assert re.search(r'id="taken-at"[^>]*>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC<', html)
    assert waiting.status == "queued"


def test_a_stage_without_a_worker_needs_attention(operator, redis_conn):
    queues = [get_queue(name) for name in stage_queue_names("create")]
    SimpleWorker(queues, connection=redis_connection(), name="w").register_birth()

    found = attention(operator.get(URL).content.decode())

    assert found["no_worker"] == {"store", "extract", "ocr", "embed", "settle"}


def test_a_stage_lagging_behind_needs_attention(operator, api, settings, workers_for_every_stage):
    settings.PAPERLANE_ATTENTION_LAG_SECONDS = 60
    run = accepted_run(api, make_pdf(1))
    ImportRun.objects.filter(id=run.id).update(due_at=timezone.now() - timedelta(seconds=90))

    html = operator.get(URL).content.decode()

    assert attention(html) == {"lag": {"extract"}}
    assert re.search(
        r"extract: the oldest waiting run has waited 9\d s, longer than the 60 s", html
    )


def test_a_stage_whose_provider_keeps_failing_needs_attention(
    operator, workers_for_every_stage, monkeypatch
):
    monkeypatch.setattr("core.provider_breaker.PAUSE_AFTER_FAILURES", 3)
    monkeypatch.setattr("core.provider_breaker.PAUSE_SECONDS", 30)
    monkeypatch.setattr("core.provider_breaker.PAUSE_MAX_SECONDS", 60)
    provider = breaker(PROVIDER)
    for _ in range(3):
        provider.failed()

    html = operator.get(URL).content.decode()

    assert attention(html) == {"provider": {"embed"}}
    assert re.search(
        r"embed: its provider keeps failing; its workers take none of its jobs for another "
        r"[23]\d s, then try one",
        html,
    )
    provider.succeeded()
    assert "provider" not in attention(operator.get(URL).content.decode())


@DRIVES
def test_a_stage_failing_often_needs_attention(operator, api, settings, workers_for_every_stage):
    settings.PAPERLANE_ATTENTION_FAILURE_RATE = 0.2
    settings.PAPERLANE_RETRY_MAX_ATTEMPTS = 1
    settings.PAPERLANE_EMBEDDER = "tests.support.embedders.AlwaysBusyEmbedder"
    for _ in range(2):
        assert drive(accepted_run(api, make_pdf(1)).id).status == "dead_letter"

    html = operator.get(URL).content.decode()

    assert attention(html) == {"failures": {"embed"}}
    assert "embed: 100% of attempts failed in the last 15 minutes (2 of 2)" in html
    assert cell(html, "embed", "dead_lettered_last_hour") == "2"


@DRIVES
def test_the_failure_share_at_the_limit_is_not_yet_a_problem(
    operator, api, settings, workers_for_every_stage
):
    settings.PAPERLANE_ATTENTION_FAILURE_RATE = 0.5
    run = drive(accepted_run(api, make_pdf(1)).id)
    # One failure beside extract's one success: 50%, at the limit.
    StageAttempt.objects.create(
        run=run,
        stage="extract",
        number=2,
        outcome="transient_error",
        started_at=timezone.now(),
        finished_at=timezone.now(),
    )

    assert attention(operator.get(URL).content.decode()) == {"none": {None}}


def test_stuck_runs_need_attention_and_are_listed(operator, api, settings, workers_for_every_stage):
    settings.PAPERLANE_STUCK_AFTER_SECONDS = 600
    settings.PAPERLANE_ATTENTION_LAG_SECONDS = 3600
    run = accepted_run(api, make_pdf(1))
    twenty_minutes_ago = timezone.now() - timedelta(minutes=20)
    ImportRun.objects.filter(id=run.id).update(updated_at=twenty_minutes_ago)

    html = operator.get(URL).content.decode()

    assert attention(html) == {"stuck": {None}}
    assert "1 run has made no progress for more than 10 min or lost" in html
    assert f'data-run="{run.id}"' in html and "no progress for 20 min" in html


def test_suspended_workers_and_a_silent_redis_are_said_plainly(operator, settings, redis_conn):
    from tests.support.processes import free_port

    suspend(redis_conn)
    assert "suspended" in attention(operator.get(URL).content.decode())

    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/15"
    html = operator.get(URL).content.decode()
    assert "redis" in attention(html) and "no_worker" not in attention(html)
    assert cell(html, "create", "waiting") == "–"
