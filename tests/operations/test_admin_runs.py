"""The pipeline's admin for operators: lists, filters, search, the run page, who may see it.

Actions on runs are in test_admin_actions.py.
"""

import re
import uuid
from datetime import timedelta
from importlib import import_module

import pytest
from django.apps import apps
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from documents.models import Organisation
from documents.services.organisations import member_add
from operations.admin.listing import BoundedCountPaginator
from pipeline.dispatch import stage_enqueue
from pipeline.models import ImportRun, RunSource, RunStatus, StageAttempt
from pipeline.queues import all_queue_names
from pipeline.services.workers import run_claim
from pipeline.stage_list import first_stage
from tests.support.admin import RUNS, listed, make_runs, operator_client
from tests.support.files import make_pdf
from tests.support.runs import drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db


def ids(runs) -> set[str]:
    return {str(run.id) for run in runs}


def test_the_run_page_shows_its_history_and_runs_cannot_be_deleted(operator, api):
    run = accepted_run(api, make_pdf(2))

    page = operator.get(f"/admin/pipeline/importrun/{run.id}/change/")
    delete = operator.get(f"/admin/pipeline/importrun/{run.id}/delete/")

    assert page.status_code == 200 and "accepted" in page.content.decode()
    assert delete.status_code == 403
    assert ImportRun.objects.filter(id=run.id).exists()


def test_operators_reach_rqs_queue_pages_from_the_admin_index(operator):
    index = operator.get("/admin/").content.decode()
    assert "/admin/django_rq/dashboard/" in index

    stats = operator.get("/admin/django_rq/dashboard/")

    assert stats.status_code == 200
    listed_queues = re.findall(r">\s*([a-z]+\.[a-z]+\.\d+)\s*</a>", stats.content.decode())
    assert set(all_queue_names()) <= set(listed_queues)


# --- Filters ---------------------------------------------------------------------------


def test_each_filter_lists_exactly_the_runs_it_names(operator, org, other_org):
    failed = make_runs(org, 2, status="failed", stage="extract", error_code="unreadable_document")
    dead = make_runs(org, 2, status="dead_letter", stage="embed", error_code="poison")
    queued = make_runs(org, 2, status="queued", stage="store", source=RunSource.WEB)
    bulk = make_runs(other_org, 2, source=RunSource.CONNECTOR, priority="bulk")

    assert listed(operator, "status__exact=failed") == ids(failed)
    assert listed(operator, "status__exact=dead_letter") == ids(dead)
    assert listed(operator, "stage__exact=store") == ids(queued)
    assert listed(operator, f"organisation__id__exact={other_org.id}") == ids(bulk)
    assert listed(operator, "source__exact=web") == ids(queued)
    assert listed(operator, "source__exact=connector") == ids(bulk)
    assert listed(operator, "priority__exact=bulk") == ids(bulk)
    assert listed(operator, "error_code=poison") == ids(dead)
    assert listed(operator, "status__exact=dead_letter&error_code=unreadable_document") == set()
    # The error code filter offers the codes there are, read from the index.
    page = operator.get(RUNS).content.decode()
    assert "?error_code=poison" in page and "?error_code=unreadable_document" in page


def test_the_organisation_filter_lists_organisations_only_while_they_are_few(
    operator, org, other_org
):
    theirs = make_runs(other_org, 2)
    few = operator.get(RUNS).content.decode()
    Organisation.objects.bulk_create(
        Organisation(slug=f"org-{n:02}", name=f"Org {n}", page_limit=10) for n in range(60)
    )

    many = operator.get(RUNS).content.decode()
    chosen = operator.get(f"{RUNS}?organisation__id__exact={other_org.id}").content.decode()

    assert f"?organisation__id__exact={org.id}" in few
    assert "organisation__id__exact" not in many
    assert f"?organisation__id__exact={other_org.id}" in chosen and "org-00" not in chosen
    assert listed(operator, f"organisation__id__exact={other_org.id}") == ids(theirs)


def test_the_stuck_filter_finds_stalled_runs_expired_leases_and_lost_jobs(
    operator, org, settings, redis_conn
):
    now = timezone.now()
    long_ago = now - timedelta(seconds=settings.PAPERLANE_STUCK_AFTER_SECONDS + 60)
    stalled, expired, lost, waiting, fresh, running, ended = (
        make_runs(org, 1, status=status, stage="store", due_at=now - timedelta(seconds=30))[0]
        for status in ["queued", "processing", "queued", "queued", "queued", "processing", "failed"]
    )
    ImportRun.objects.filter(id__in=[stalled.id, ended.id]).update(updated_at=long_ago)
    ImportRun.objects.filter(id=expired.id).update(
        lease_owner="job@host.1", lease_expires_at=now - timedelta(seconds=5)
    )
    ImportRun.objects.filter(id=running.id).update(
        lease_owner="job@host.2", lease_expires_at=now + timedelta(seconds=30)
    )
    ImportRun.objects.filter(id=fresh.id).update(due_at=now)
    # `waiting` has its job in Redis; every other due run's job is missing (flushed db).
    assert stage_enqueue(run_id=waiting.id, stage="store", attempt=0)

    assert listed(operator, "stuck=no_progress") == ids([stalled])
    assert listed(operator, "stuck=lease_expired") == ids([expired])
    assert listed(operator, "stuck=no_job") == ids([stalled, lost])
    assert listed(operator, "stuck=any") == ids([stalled, expired, lost])


# --- Search ----------------------------------------------------------------------------


def test_search_finds_runs_by_id_document_slug_code_and_error_text(operator, org, other_org):
    plain = make_runs(org, 3, name="quarterly-report")
    target = make_runs(other_org, 1, name="invoice-2024", status="failed", error_code="poison")[0]
    StageAttempt.objects.filter(run=target).update(error_message="")
    StageAttempt.objects.create(
        run=target,
        stage="embed",
        number=9,
        started_at=timezone.now(),
        outcome="transient_error",
        error_message="TransientError: the provider answered 418 I'm a teapot",
    )

    assert listed(operator, f"q={target.id}") == ids([target])
    assert listed(operator, f"q={target.document_id}") == ids([target])
    assert listed(operator, f"q={str(target.id)[:8]}") >= ids([target])
    assert listed(operator, "q=invoice-20") == ids([target])
    assert listed(operator, "q=globex") == ids([target])
    assert listed(operator, "q=poison") == ids([target])
    assert listed(operator, "q=teapot") == ids([target])
    assert listed(operator, "q=quarterly") == ids(plain)
    assert listed(operator, "q=nothing-like-this") == set()


def test_a_whole_uuid_is_looked_up_by_key_not_by_pattern(operator, org):
    run = make_runs(org, 1)[0]

    with CaptureQueriesContext(connection) as queries:
        found = listed(operator, f"q={run.id}")

    assert found == ids([run])
    searches = [q["sql"] for q in queries if "jobs_importrun" in q["sql"] and "WHERE" in q["sql"]]
    assert searches and not any("LIKE" in sql for sql in searches)
    assert any(f'"jobs_importrun"."id" = \'{run.id.hex}\'::uuid' in sql for sql in searches)


# --- The run page ----------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_the_run_page_shows_every_attempt_with_its_traceback_folded(api, org, settings):
    settings.PAPERLANE_EMBEDDER = "tests.support.embedders.AlwaysBusyEmbedder"
    settings.PAPERLANE_RETRY_MAX_ATTEMPTS = 1
    run = drive(accepted_run(api, make_pdf(2)).id)
    assert run.status == "dead_letter"
    operator = operator_client(org)

    page = operator.get(f"{RUNS}{run.id}/change/").content.decode()

    attempts = page[page.index('id="attempts"') : page.index('id="transitions"')]
    assert attempts.count("<tr>") == 1 + 2  # header + extract, embed
    assert "pipeline.errors.TransientError" in attempts and "503 Service Unavailable" in attempts
    folded = re.search(
        r"<details><summary>traceback</summary><pre[^>]*>(.*?)</pre>", attempts, re.S
    )
    assert folded and "Traceback (most recent call last)" in folded.group(1)
    history = page[page.index('id="transitions"') :]
    assert "embed failed 1 times; last error: TransientError" in history
    assert "2 pages, released" in page  # the reservation
    assert "nothing charged for this document version" in page  # the ledger
    # The document: its unsettled chunks went with the run.
    assert "2 pages, not searchable, 0 chunks stored for version 1" in page
    assert "none: the run has ended" in page  # its RQ job


@pytest.mark.django_db(transaction=True)
def test_the_run_page_shows_the_rq_job_as_rq_sees_it(api, org):
    first, second = accepted_run(api, make_pdf(1)), accepted_run(api, make_pdf(1))
    operator = operator_client(org)

    queued = operator.get(f"{RUNS}{second.id}/change/").content.decode()
    stage = first_stage(RunSource.API)
    run_claim(run_id=first.id, stage=stage, job_id="job-x", worker=f"host.7.{stage}")
    started = operator.get(f"{RUNS}{first.id}/change/").content.decode()

    lane = rf"{stage}\.interactive\.\d"
    assert re.search(rf"<strong>queued</strong>.*queued in {lane} at position 2", queued, re.S)
    # A claimed stage: the job named in the lease (RQ knows no "job-x": it is missing).
    assert re.search(r"<strong>missing</strong>: <code>job-x</code>", started)


def test_times_are_shown_to_the_second_in_the_site_time_zone(operator, org, settings):
    settings.TIME_ZONE = "Asia/Kathmandu"  # UTC+05:45, so no whole-hour coincidence
    run = make_runs(org, 1)[0]
    created = timezone.localtime(run.created_at, timezone.get_current_timezone())
    shown = created.strftime("%Y-%m-%d %H:%M:%S")

    assert shown in operator.get(RUNS).content.decode()
    assert shown in operator.get(f"{RUNS}{run.id}/change/").content.decode()


def test_the_list_cuts_a_long_last_error_and_shows_its_first_1000_characters_on_hover(
    operator, org
):
    [run] = make_runs(org, 1, status="failed", error_code="damaged_pdf")
    long = "".join(f"{n:04d} " for n in range(400))  # 2,000 characters
    StageAttempt.objects.create(
        run=run, stage="extract", number=1, started_at=timezone.now(), error_message=long
    )

    page = operator.get(RUNS).content.decode()

    [(title, shown)] = re.findall(r'<code>damaged_pdf</code> <span title="([^"]*)">([^<]*)<', page)
    assert title == long[:999] + "…" and len(title) == 1000
    assert shown == long[:79] + "…"


# --- Staying fast ------------------------------------------------------------------------


def test_the_list_and_the_run_page_make_the_same_queries_for_10_or_1000_runs(operator, org):
    def queries(url: str) -> int:
        operator.get(url)  # warm caches (content types, permissions)
        with CaptureQueriesContext(connection) as captured:
            assert operator.get(url).status_code == 200
        return len(captured)

    runs = make_runs(org, 10, attempts=3, status="failed", error_code="poison")
    page = f"{RUNS}{runs[0].id}/change/"
    few = [queries(RUNS), queries(f"{RUNS}?stuck=any"), queries(f"{RUNS}?q=bulk"), queries(page)]
    more = make_runs(org, 990, attempts=3, status="failed", error_code="poison", name="more")
    StageAttempt.objects.bulk_create(
        StageAttempt(run=runs[0], stage="embed", number=n, started_at=timezone.now())
        for n in range(1, 50)
    )
    many = [queries(RUNS), queries(f"{RUNS}?stuck=any"), queries(f"{RUNS}?q=bulk"), queries(page)]

    assert len(more) == 990 and few == many


def test_big_lists_are_counted_only_up_to_a_cap(operator, org, monkeypatch):
    monkeypatch.setattr(BoundedCountPaginator, "COUNT_CAP", 5)
    make_runs(org, 8, status="failed")

    filtered = operator.get(f"{RUNS}?status__exact=failed").content.decode()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_importrun")
    unfiltered = operator.get(RUNS).content.decode()

    assert re.search(r"5\+\s+import runs", filtered)
    assert re.search(r"about 8\s+import runs", unfiltered)


def test_the_attempts_list_filters_by_stage_outcome_and_error_type(operator, org):
    run = make_runs(org, 1, attempts=2)[0]
    StageAttempt.objects.create(
        run=run,
        stage="extract",
        number=1,
        started_at=timezone.now(),
        outcome="permanent_error",
        error_type="pypdf.errors.PdfReadError",
        error_message="PdfReadError: bad xref",
    )

    def shown(query: str) -> int:
        page = operator.get(f"/admin/pipeline/stageattempt/?{query}")
        assert page.status_code == 200
        links = r'href="/admin/pipeline/stageattempt/\d+/change/'
        return len(re.findall(links, page.content.decode()))

    assert shown("") == 3
    assert shown("stage__exact=extract") == 1
    assert shown("outcome__exact=transient_error") == 2
    assert shown("error_type=pypdf.errors.PdfReadError") == 1
    assert shown(f"q={run.id}") == 3


# --- Who may see it --------------------------------------------------------------------


def admin_urls(run: ImportRun) -> list[str]:
    return [
        RUNS,
        f"{RUNS}?stuck=any",
        f"{RUNS}{run.id}/change/",
        f"{RUNS}dead-letter/",
        f"{RUNS}dead-letter/retry/?error_code=poison&stage=embed",
        *(
            f"{RUNS}act/{name}/?runs={run.id}"
            for name in ["requeue", "retry", "cancel", "dead_letter"]
        ),
        "/admin/pipeline/stageattempt/",
    ]


def test_members_who_are_not_staff_get_the_login_page_on_every_admin_url(member_client, org):
    run = make_runs(org, 1, status="dead_letter", error_code="poison", stage="embed")[0]
    anonymous = Client()

    for client in (member_client, anonymous):
        for url in admin_urls(run):
            response = client.get(url)
            assert response.status_code == 302, url
            assert response["Location"].startswith("/admin/login/"), url
        for name in ["requeue", "retry", "cancel", "dead_letter"]:
            response = client.post(f"{RUNS}act/{name}/", {"runs": str(run.id), "reason": "x" * 9})
            assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert ImportRun.objects.get(id=run.id).status == "dead_letter"


def test_staff_without_the_pipeline_permissions_get_403_and_viewers_cannot_act(org, other_org):
    run = make_runs(org, 1, status="dead_letter", error_code="poison", stage="embed")[0]
    # Staff, but not in the Operators group: no permission on the pipeline's models.
    sam = member_add(organisation=other_org, username="sam", password="staff-pass-1")
    sam.is_staff = True
    sam.save(update_fields=["is_staff"])
    staff = Client()
    assert staff.login(username="sam", password="staff-pass-1")

    for url in admin_urls(run):
        assert staff.get(url).status_code == 403, url

    sam.user_permissions.add(Permission.objects.get(codename="view_importrun"))
    assert staff.get(RUNS).status_code == 200
    assert staff.get(f"{RUNS}dead-letter/").status_code == 200
    for name in ["requeue", "retry", "cancel", "dead_letter"]:
        assert staff.get(f"{RUNS}act/{name}/?runs={run.id}").status_code == 403
        response = staff.post(f"{RUNS}act/{name}/", {"runs": str(run.id), "reason": "x" * 9})
        assert response.status_code == 403
    assert ImportRun.objects.get(id=run.id).status == "dead_letter"


# --- When a run entered its stage --------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_run_records_when_it_entered_each_stage_or_status(api):
    run = drive(accepted_run(api, make_pdf(1)).id)

    changes = run.transitions.exclude(from_status=RunStatus.SUCCEEDED).order_by("created_at")
    assert run.status == "succeeded"
    assert abs(run.stage_entered_at - run.finished_at) < timedelta(milliseconds=50)
    assert run.stage_entered_at >= changes.last().created_at - timedelta(milliseconds=50)


def test_the_migration_dates_existing_runs_from_their_last_change(org):
    migration = import_module("pipeline.migrations.0003_operator_admin")
    run = make_runs(org, 1)[0]
    long_ago = timezone.now() - timedelta(days=3)
    ImportRun.objects.filter(id=run.id).update(created_at=long_ago - timedelta(hours=1))
    make = run.transitions.create
    make(from_status="", to_status="queued", from_stage="", to_stage="create", actor_label="a")
    make(
        from_status="queued",
        to_status="processing",
        from_stage="create",
        to_stage="create",
        actor_label="w",
    )
    make(
        from_status="processing",
        to_status="processing",
        from_stage="create",
        to_stage="create",
        actor_label="w",
        reason="retry in 2s",
    )  # no change of stage or status
    changes = list(run.transitions.order_by("id"))
    for n, transition in enumerate(changes):
        type(transition).objects.filter(id=transition.id).update(
            created_at=long_ago + timedelta(minutes=n)
        )
    untouched = make_runs(org, 1, name="untouched")[0]

    migration.stage_entered_from_history(apps, None)

    run.refresh_from_db()
    untouched.refresh_from_db()
    assert run.stage_entered_at == long_ago + timedelta(minutes=1)
    assert untouched.stage_entered_at == untouched.created_at


def test_an_unknown_run_id_is_not_found_not_an_error(operator):
    response = operator.get(f"{RUNS}{uuid.uuid4()}/change/", follow=True)
    assert response.status_code == 200 and "doesn’t exist" in response.content.decode()
    assert operator.get(f"{RUNS}not-a-uuid/change/", follow=True).status_code == 200
