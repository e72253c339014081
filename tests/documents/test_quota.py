"""Quota reservations under real concurrency, the ledger and releases, on PostgreSQL."""

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import IntegrityError, connection, transaction

from core.errors import QuotaExceeded
from documents.models import Organisation, QuotaReservation, UsageEntry
from documents.services.organisations import organisation_create
from documents.services.quota import quota_release, quota_settle
from documents.services.tokens import api_token_create
from pipeline.models import ImportRun
from tests.support.files import make_pdf
from tests.support.locks import wait_for_lock_waiters
from tests.support.processes import web_server
from tests.support.runs import held_reservation
from tests.support.uploads import accepted_run


def _accepted_run(api, pages: int) -> ImportRun:
    return accepted_run(api, make_pdf(pages))


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_concurrent_uploads_never_overspend_the_quota(media_files):
    org = organisation_create(slug="tight", page_limit=10)
    _, raw = api_token_create(organisation=org)
    pdf = make_pdf(4)
    barrier = threading.Barrier(30)

    def post(url):
        with httpx.Client(timeout=30) as client:
            barrier.wait()
            response = client.post(
                url, files={"file": ("four.pdf", pdf)}, headers={"Authorization": f"Bearer {raw}"}
            )
        return response.status_code, response.json()

    with web_server(workers=6, threads=5) as base, ThreadPoolExecutor(max_workers=30) as pool:
        # The same bytes each time, each a document of its own.
        url = f"{base}/api/v1/documents?allow_duplicate=true"
        results = list(pool.map(post, [url] * 30))

    statuses = sorted(status for status, _ in results)
    assert statuses.count(202) == 2
    assert statuses.count(402) == 28
    refused = [body for status, body in results if status == 402]
    assert all(body["pages_available"] in (2, 6) for body in refused)
    org.refresh_from_db()
    assert org.pages_reserved == 8
    assert org.pages_used + org.pages_reserved <= org.page_limit
    assert ImportRun.objects.filter(organisation=org).count() == 2
    assert QuotaReservation.objects.filter(organisation=org, status="held").count() == 2
    # Only the two admitted documents were left in storage.
    assert len(media_files()) == 2


@pytest.mark.django_db
def test_the_database_refuses_a_total_above_the_limit(org):
    with pytest.raises(IntegrityError):
        Organisation.objects.filter(id=org.id).update(pages_reserved=org.page_limit + 1)


@pytest.mark.django_db
def test_it_settles_the_actual_page_count_once(api, org):
    run = _accepted_run(api, 4)

    first = quota_settle(reservation=run.reservation, document=run.document, pages=4)
    again = quota_settle(reservation=run.reservation, document=run.document, pages=4)

    assert first.charged and not again.charged
    assert first.entry.id == again.entry.id
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (4, 0)
    assert UsageEntry.objects.filter(document=run.document).count() == 1


@pytest.mark.django_db
def test_the_ledger_refuses_a_second_charge_for_the_same_document_version(api, org):
    run = _accepted_run(api, 3)
    quota_settle(reservation=run.reservation, document=run.document, pages=3)

    with pytest.raises(IntegrityError):
        UsageEntry.objects.create(
            organisation=org, document=run.document, document_version=1, pages=3
        )


@pytest.mark.django_db
def test_a_second_run_of_the_same_version_is_not_charged_and_its_hold_is_released(api, org):
    run = _accepted_run(api, 3)
    quota_settle(reservation=run.reservation, document=run.document, pages=3)
    rerun = _accepted_run(api, 3)
    rerun.document = run.document  # as a retry of the same document version would be

    settlement = quota_settle(reservation=rerun.reservation, document=run.document, pages=3)

    assert not settlement.charged
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (3, 0)
    assert QuotaReservation.objects.get(run=rerun).status == "released"


@pytest.mark.django_db
def test_settle_adjusts_an_estimate_up_and_down(api, org):
    low = _accepted_run(api, 2)
    high = _accepted_run(api, 5)

    quota_settle(reservation=low.reservation, document=low.document, pages=6)
    quota_settle(reservation=high.reservation, document=high.document, pages=1)

    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (7, 0)


@pytest.mark.django_db
def test_settle_refuses_pages_beyond_the_limit(api, org):
    Organisation.objects.filter(id=org.id).update(page_limit=5)
    run = _accepted_run(api, 4)

    # The caller's transaction ends with the error (the services add no savepoint).
    with pytest.raises(QuotaExceeded), transaction.atomic():
        quota_settle(reservation=run.reservation, document=run.document, pages=9)

    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (0, 4)
    assert not UsageEntry.objects.exists()


@pytest.mark.django_db
def test_it_releases_reserved_pages(api, org):
    run = _accepted_run(api, 4)

    assert quota_release(reservation=run.reservation) is True
    assert quota_release(reservation=run.reservation) is False

    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (0, 0)
    assert QuotaReservation.objects.get(run=run).status == "released"


@pytest.mark.django_db
def test_quota_endpoint_reports_the_organisations_numbers(api, org, other_api):
    _accepted_run(api, 4)

    mine = api.get("/api/v1/quota").json()
    theirs = other_api.get("/api/v1/quota").json()

    assert mine == {
        "page_limit": 1000,
        "pages_used": 0,
        "pages_reserved": 4,
        "pages_available": 996,
    }
    assert theirs["pages_reserved"] == 0


# The ledger's insert, as PostgreSQL shows it waiting on another's insert of the same version.
CHARGING = f"INSERT INTO {UsageEntry._meta.db_table} %"


@pytest.mark.django_db(transaction=True)
def test_two_settles_of_one_version_at_once_charge_it_once(api, org):
    run = _accepted_run(api, 3)
    other = held_reservation(organisation_id=org.id, pages=3)
    first_inserted = threading.Event()
    outcomes, order = {}, []

    def settle_and_hold():  # settles, then keeps its transaction open until the second waits
        try:
            with transaction.atomic():
                outcomes["first"] = quota_settle(
                    reservation=run.reservation, document=run.document, pages=3
                ).charged
                first_inserted.set()
                wait_for_lock_waiters(1, like=CHARGING, timeout=10)
                order.append("first commits")
        finally:
            first_inserted.set()
            connection.close()

    holder = threading.Thread(target=settle_and_hold)
    holder.start()
    first_inserted.wait(10)
    try:
        order.append("second settles")
        # Waits for the first transaction on the ledger's unique key, then charges nothing.
        outcomes["second"] = quota_settle(reservation=other, document=run.document, pages=3).charged
    finally:
        holder.join(10)

    assert order == ["second settles", "first commits"]  # at once, not one after the other
    assert outcomes == {"first": True, "second": False}
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (3, 0)
    assert UsageEntry.objects.filter(document=run.document).count() == 1
    assert QuotaReservation.objects.get(id=other.id).status == "released"
