"""The pipeline dashboard in a real browser while real workers process a burst.

The page is read twice. While the burst flows, numbers that only move one way
(attempts that succeeded, pages charged, runs still open) must lie between what
the database said just before and just after the page was rendered. Then the
workers are suspended (`rq suspend`): once every worker has seen it (or waits on empty
lanes) and no stage is held, the page must show exactly what the database and RQ say.
"""

import re
import shutil
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import close_old_connections
from django.db.models import Q
from django.utils import timezone
from rq.registry import ScheduledJobRegistry, StartedJobRegistry
from rq.suspension import resume, suspend
from rq.worker import Worker, WorkerStatus

from core.redis import redis_connection
from documents.models import Organisation
from documents.services.organisations import member_add
from pipeline.broker import get_queue
from pipeline.models import ACTIVE_STATUSES, ImportRun, StageAttempt
from pipeline.queues import queue_stage, stage_queue_names
from pipeline.stage_list import STAGES
from tests.support.files import make_pdf
from tests.support.pipeline import running_workers, wait_for, wait_terminal
from tests.support.processes import process_env, web_server
from tests.support.uploads import accepted_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

DOCUMENTS = 15
STAGE_NAMES = [str(spec.name) for spec in STAGES]
# Fields the test reads from the page and computes itself from the database and RQ.
EXACT_FIELDS = (
    "waiting",
    "started_jobs",
    "scheduled_jobs",
    "due",
    "running",
    "retry_scheduled",
    "stuck",
    "done_60m",
    "failed_60m",
    "workers",
)
SCREENSHOT = "/tmp/paperlane-dashboard.png"


def truth() -> dict:
    """What the database and RQ say now, read independently of operations.stats."""
    close_old_connections()
    now, connection = timezone.now(), redis_connection()
    workers = Worker.all(connection=connection)
    hour_ago = now - timedelta(hours=1)
    active = ImportRun.objects.filter(status__in=ACTIVE_STATUSES)
    stages = {}
    for name in STAGE_NAMES:
        runs = active.filter(stage=name)
        lanes = stage_queue_names(name)
        attempts = StageAttempt.objects.filter(stage=name, finished_at__gte=hour_ago)
        stages[name] = {
            "waiting": sum(get_queue(lane).count for lane in lanes),
            "started_jobs": sum(
                StartedJobRegistry(lane, connection=connection).get_job_count(cleanup=False)
                for lane in lanes
            ),
            "scheduled_jobs": sum(
                ScheduledJobRegistry(lane, connection=connection).get_job_count(cleanup=False)
                for lane in lanes
            ),
            "due": runs.filter(lease_owner="").filter(Q(due_at__lte=now) | Q(due_at=None)).count(),
            "running": runs.exclude(lease_owner="").filter(lease_expires_at__gte=now).count(),
            "retry_scheduled": runs.filter(lease_owner="", due_at__gt=now).count(),
            "stuck": runs.filter(
                Q(updated_at__lt=now - timedelta(seconds=settings.PAPERLANE_STUCK_AFTER_SECONDS))
                | (~Q(lease_owner="") & Q(lease_expires_at__lt=now))
            ).count(),
            "done_60m": attempts.filter(outcome="succeeded").count(),
            "failed_60m": attempts.exclude(outcome__in=["succeeded", "skipped"]).count(),
            "workers": sum(1 for w in workers if name in map(queue_stage, w.queue_names())),
        }
    organisation = Organisation.objects.get(slug="acme")
    return {
        "stages": stages,
        "open_runs": active.count(),
        "pages_used": organisation.pages_used,
        "pages_reserved": organisation.pages_reserved,
        "workers": sorted(w.name for w in workers),
    }


def shown(page) -> dict:
    """The same numbers as the dashboard shows them."""

    def field(stage: str, name: str) -> int:
        element = page.locator(f'tr[data-stage="{stage}"] [data-field="{name}"]')
        raw = element.get_attribute("data-value") or element.inner_text()
        return int(raw)

    organisation = page.locator('tr[data-organisation="acme"]')
    return {
        "stages": {s: {f: field(s, f) for f in EXACT_FIELDS} for s in STAGE_NAMES},
        "pages_used": int(organisation.locator('[data-field="pages_used"]').inner_text()),
        "pages_reserved": int(organisation.locator('[data-field="pages_reserved"]').inner_text()),
        "workers": sorted(
            page.locator("tr[data-worker]").evaluate_all("rows => rows.map(r => r.dataset.worker)")
        ),
        "attention": page.locator("#attention li").evaluate_all(
            "items => items.map(i => i.dataset.kind)"
        ),
        "taken_at": page.inner_text("#taken-at"),
    }


def open_runs_shown(numbers: dict) -> int:
    return sum(s["due"] + s["running"] + s["retry_scheduled"] for s in numbers["stages"].values())


def truth_at_rest() -> dict | None:
    """The database and RQ once every worker has seen `rq suspend` or waits on lanes with
    nothing in them or being taken, and no stage is held; None until then."""
    connection = redis_connection()
    for worker in Worker.all(connection=connection):
        state = worker.get_state()
        lanes = [get_queue(name) for name in worker.queue_names()]
        # An idle worker blocked on empty lanes takes nothing while the others are suspended.
        idle = state == WorkerStatus.IDLE and not any(
            lane.count or connection.llen(lane.intermediate_queue_key) for lane in lanes
        )
        if state != WorkerStatus.SUSPENDED and not idle:
            return None
    current = truth()
    held = any(s["running"] or s["started_jobs"] for s in current["stages"].values())
    return None if held else current


def test_the_dashboard_shows_a_burst_as_the_database_and_rq_see_it(
    page, tmp_path, api, org, capsys
):
    member_add(organisation=org, username="olga", password="operator-pass-1", staff=True)
    slow = {
        "PAPERLANE_EMBEDDER": "tests.support.embedders.SlowEmbedder",
        "EMBED_DELAY": "0.3",
        "PAPERLANE_EMBED_BATCH_SIZE": "2",
    }
    # The page shows times in the site's time zone, whatever the server's clock says.
    site = process_env(TIME_ZONE="Europe/Paris")
    with running_workers(**slow), web_server(workers=2, env=site) as base:
        runs = [
            accepted_run(api, make_pdf(3, words_per_page=250), f"burst-{n}.pdf").id
            for n in range(DOCUMENTS)
        ]
        # The burst flows: some documents have been embedded, most still wait for it.
        wait_for(
            lambda: StageAttempt.objects.filter(stage="embed", outcome="succeeded").count() >= 2,
            timeout=60,
            what="the first embeddings",
        )
        page.goto(f"{base}/admin/login/?next=/admin/pipeline/")
        page.fill("#id_username", "olga")
        page.fill("#id_password", "operator-pass-1")
        page.click("input[type=submit]")
        page.wait_for_url(f"{base}/admin/pipeline/")

        before = truth()
        page.reload()
        busy = shown(page)
        after = truth()
        busy_png = tmp_path / "dashboard-busy.png"
        page.screenshot(path=str(busy_png), full_page=True)

        # Numbers that only move one way lie between the readings around the page.
        for stage in STAGE_NAMES:
            low, high = before["stages"][stage]["done_60m"], after["stages"][stage]["done_60m"]
            assert low <= busy["stages"][stage]["done_60m"] <= high, stage
        assert before["pages_used"] <= busy["pages_used"] <= after["pages_used"]
        assert after["open_runs"] <= open_runs_shown(busy) <= before["open_runs"]
        assert 0 < open_runs_shown(busy)  # still mid-burst
        assert busy["workers"] == before["workers"] == after["workers"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d CES?T", busy["taken_at"])

        # Pause the workers and compare exactly.
        suspend(redis_connection())
        try:
            rest = wait_for(truth_at_rest, timeout=30, what="the pipeline to rest")
            page.reload()
            paused = shown(page)
            again = truth()
            paused_png = tmp_path / "dashboard.png"
            page.screenshot(path=str(paused_png), full_page=True)
        finally:
            resume(redis_connection())

        assert again == rest, "the pipeline moved while the page was read"
        assert paused["stages"] == rest["stages"]
        assert (paused["pages_used"], paused["pages_reserved"]) == (
            rest["pages_used"],
            rest["pages_reserved"],
        )
        assert paused["workers"] == rest["workers"]
        assert "suspended" in paused["attention"]
        assert rest["open_runs"] > 0 and rest["stages"]["embed"]["waiting"] > 0

        ended = wait_terminal(runs, timeout=120)
        page.reload()
        final = shown(page)

    assert {run.status for run in ended.values()} == {"succeeded"}
    assert final["stages"]["settle"]["done_60m"] == DOCUMENTS
    assert final["pages_used"] == 3 * DOCUMENTS and final["pages_reserved"] == 0
    paused_copy = SCREENSHOT.replace(".png", "-paused.png")
    shutil.copyfile(busy_png, SCREENSHOT)
    shutil.copyfile(paused_png, paused_copy)
    with capsys.disabled():  # shown even when pytest captures output
        print(
            f"\ndashboard screenshots: {busy_png} (busy), {paused_png} (paused); "
            f"copied to {SCREENSHOT} and {paused_copy}"
        )
