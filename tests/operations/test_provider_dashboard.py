"""The embedding provider on the pipeline dashboard and /metrics: while it is out, an
operator sees its breaker open, the runs waiting for it and its last error, not dead
letters; once a call goes through, it reads closed again."""

import re
import time

import pytest
from django.utils import timezone

from core.provider_breaker import breaker
from core.redis import redis_connection
from pipeline.engine import execute_stage
from pipeline.errors import PROVIDER_OUTAGE
from pipeline.models import ImportRun
from retrieval.embedding import PROVIDER
from tests.operations.test_metrics import scrape
from tests.support.files import make_pdf
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/admin/pipeline/"


def section(html: str) -> str:
    return html.split('id="embedding-provider"', 1)[1].split("</section>", 1)[0]


def field(html: str, name: str) -> str:
    return re.search(rf'data-field="{name}"[^>]*>(.*?)</(?:span|p)>', section(html), re.S)[1]


def state(html: str) -> str:
    return re.search(r'data-field="provider-state" data-state="([a-z]+)"', section(html))[1]


@pytest.fixture
def waiting_run(api, settings):
    """A run whose try of embed failed while the provider's breaker was open (opened
    twice, paused for 30 s more): it waits for the provider."""
    settings.PAPERLANE_EMBEDDER = "tests.support.embedders.AlwaysBusyEmbedder"
    settings.PAPERLANE_RETRY_MAX_ATTEMPTS = 1
    run = accepted_run(api, make_pdf(1))
    assert execute_stage(str(run.id), "extract")["outcome"] == "succeeded"
    redis_connection().hset(
        breaker(PROVIDER).key, mapping={"until": time.time() + 30, "opens": 2, "failures": 0}
    )
    ImportRun.objects.filter(id=run.id).update(due_at=timezone.now())
    assert execute_stage(str(run.id), "embed")["outcome"] == "transient_error"
    assert ImportRun.objects.get(id=run.id).error_code == PROVIDER_OUTAGE
    return run


def test_an_outage_shows_its_breaker_open_the_runs_waiting_and_the_last_error(
    operator, waiting_run
):
    html = operator.get(URL).content.decode()

    assert state(html) == "paused"
    assert re.search(r"open until <time[^>]*>\d\d:\d\d:\d\d</time>, opened 2 times", section(html))
    assert field(html, "provider-waiting") == "1"
    last_error = field(html, "provider-last-error")
    assert "503 Service Unavailable" in last_error and "this try is not counted" in last_error
    assert f"?error_code={PROVIDER_OUTAGE}&amp;stage__exact=embed" in section(html)


def test_metrics_carry_the_outage_and_the_runs_waiting_for_the_provider(operator, waiting_run):
    samples = scrape(operator)

    assert samples["paperlane_embedding_provider_open", ()] == 1
    assert samples["paperlane_runs_waiting_for_provider", ()] == 1


def test_a_provider_that_answers_again_reads_closed_and_nothing_waits(operator, api):
    redis_connection().hset(breaker(PROVIDER).key, mapping={"failures": 2})
    html = operator.get(URL).content.decode()
    assert state(html) == "failing"
    assert "last 2 calls failed in a row" in section(html)

    redis_connection().delete(breaker(PROVIDER).key)  # a call went through

    html = operator.get(URL).content.decode()
    assert state(html) == "closed"
    assert field(html, "provider-waiting") == "0"
    samples = scrape(operator)
    assert samples["paperlane_embedding_provider_open", ()] == 0
    assert samples["paperlane_runs_waiting_for_provider", ()] == 0


def test_a_pause_that_has_ended_with_no_success_since_reads_as_still_out(operator):
    redis_connection().hset(
        breaker(PROVIDER).key, mapping={"until": time.time() - 1, "opens": 3, "failures": 0}
    )

    html = operator.get(URL).content.decode()

    assert state(html) == "probing"
    assert scrape(operator)["paperlane_embedding_provider_open", ()] == 1
