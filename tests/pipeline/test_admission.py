"""Admission control at accept: uploads refused with 429 and an honest Retry-After when
the interactive backlog is full or late, or the organisation has its bound in flight;
refusals record nothing, hold no pages and never touch storage."""

import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import httpx
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from documents.models import Document, Organisation, QuotaReservation
from documents.services.organisations import organisation_create
from documents.services.tokens import api_token_create
from pipeline.models import ACTIVE_STATUSES, ImportRun, RunTransition
from pipeline.services import admission as admission_service
from tests.support.admin import make_runs
from tests.support.files import make_pdf
from tests.support.pipeline import running_workers, wait_terminal
from tests.support.processes import process_env, web_server
from tests.support.uploads import accepted_run, upload


def assert_refused(response, *, reason_text: str = "busy") -> int:
    """The 429 of a refusal; returns its Retry-After in seconds."""
    assert response.status_code == 429, response.content
    retry_after = int(response.headers["Retry-After"])
    body = response.json()
    assert body["code"] == "busy"
    assert body["retry_after"] == retry_after >= 1
    assert reason_text in body["detail"]
    return retry_after


def recorded(organisation) -> dict[str, int]:
    """What the organisation has in the database: documents, runs, reservations, pages held
    or charged, and transitions."""
    organisation.refresh_from_db()
    return {
        "documents": Document.objects.filter(organisation=organisation).count(),
        "runs": ImportRun.objects.filter(organisation=organisation).count(),
        "reservations": QuotaReservation.objects.filter(organisation=organisation).count(),
        "pages": organisation.pages_reserved + organisation.pages_used,
        "transitions": RunTransition.objects.filter(run__organisation=organisation).count(),
    }


def ended_lately(organisation, count: int, *, over_seconds: float) -> None:
    """`count` interactive runs that ended evenly over the last `over_seconds`."""
    now = timezone.now()
    for n, run in enumerate(make_runs(organisation, count, name="ended")):
        ago = over_seconds * n / max(count - 1, 1)
        ImportRun.objects.filter(id=run.id).update(finished_at=now - timedelta(seconds=ago))


def in_flight(organisation, count: int, **fields) -> list[ImportRun]:
    """`count` interactive runs of the organisation that have not ended (queued, due now)."""
    fields = {"status": "queued", "stage": "create", "due_at": timezone.now(), **fields}
    return make_runs(organisation, count, held=True, name="waiting", **fields)


# --- The backlog bound, with real workers and real HTTP -----------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_burst_over_the_backlog_bound_is_refused_and_each_is_accepted_after_its_retry_after(
    media_files,
):
    org = organisation_create(slug="burst", page_limit=1000)
    _, raw = api_token_create(organisation=org)
    headers = {"Authorization": f"Bearer {raw}"}
    pdf = make_pdf(1)
    site = process_env(PAPERLANE_ADMISSION_BACKLOG_BOUND="3")

    def post(base: str, name: str) -> httpx.Response:
        # The same bytes each time, each a document of its own.
        with httpx.Client(timeout=30) as client:
            return client.post(
                f"{base}/api/v1/documents?allow_duplicate=true",
                files={"file": (name, pdf)},
                headers=headers,
            )

    # Four uploads at a time: uploads accepted together may pass the backlog bound a little.
    # Each run takes a moment to embed, like a remote model: the burst meets a backlog
    # however fast the other stages are, and the drain rate is a real one.
    slow = {"PAPERLANE_EMBEDDER": "tests.support.embedders.SlowEmbedder", "EMBED_DELAY": "0.3"}
    with running_workers(**slow), web_server(workers=2, threads=2, env=site) as base:
        # Some runs end first, so the drain rate is measured, as on a working system.
        warm = [post(base, f"warm-{n}.pdf").json()["run_id"] for n in range(3)]
        wait_terminal(warm, timeout=60)
        before = recorded(org)
        stored_before = len(media_files())

        barrier = threading.Barrier(16)

        def burst(n: int) -> httpx.Response:
            barrier.wait()
            return post(base, f"burst-{n}.pdf")

        with ThreadPoolExecutor(max_workers=16) as pool:
            answers = list(pool.map(burst, range(16)))
        accepted = [a.json()["run_id"] for a in answers if a.status_code == 202]
        refused = [(n, a) for n, a in enumerate(answers) if a.status_code != 202]
        waits = [assert_refused(a) for _, a in refused]

        assert len(accepted) >= 3 and len(refused) >= 6, [a.status_code for a in answers]
        # Nothing of the refused ones was recorded or stored, and they hold no pages.
        after = recorded(org)
        assert after["documents"] - before["documents"] == len(accepted)
        assert after["runs"] - before["runs"] == len(accepted)
        assert after["reservations"] - before["reservations"] == len(accepted)
        assert after["pages"] - before["pages"] == len(accepted)
        assert len(media_files()) - stored_before == len(accepted)
        # From the measured rate, and spread: the refused do not all come back at once (with
        # no rate measured, every refusal would be answered the same default).
        assert len(set(waits)) >= len(waits) // 2 > 1, waits
        assert max(waits) <= admission_service.RETRY_AFTER_MAX_SECONDS, waits

        def again(item) -> tuple[int, int, httpx.Response]:
            (n, _), wait = item
            time.sleep(wait)  # a client honouring Retry-After: that wait is the promise tested
            return n, wait, post(base, f"burst-{n}.pdf")

        with ThreadPoolExecutor(max_workers=len(refused)) as pool:
            retried = list(pool.map(again, zip(refused, waits, strict=True)))
        late = [(n, wait, r.status_code, r.text) for n, wait, r in retried if r.status_code != 202]
        assert not late, late
        wait_terminal(accepted + [r.json()["run_id"] for _, _, r in retried], timeout=120)


# --- The promise -------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_an_upload_is_refused_while_a_run_has_waited_past_the_promise(
    api, org, settings, media_files, monkeypatch
):
    settings.PAPERLANE_ADMISSION_PROMISE_SECONDS = 60
    monkeypatch.setattr(admission_service, "RETRY_AFTER_DEFAULT_SECONDS", 40)
    # No workers: the first upload waits.
    first = accepted_run(api, make_pdf(1))
    ImportRun.objects.filter(id=first.id).update(due_at=timezone.now() - timedelta(seconds=61))
    before, stored = recorded(org), media_files()

    response = upload(api, make_pdf(2))

    # Nothing ended lately: no drain rate, so the configured default.
    assert assert_refused(response) == 40
    assert recorded(org) == before and media_files() == stored


@pytest.mark.django_db(transaction=True)
def test_a_run_held_by_a_worker_or_due_within_the_promise_does_not_refuse(api, org, settings):
    settings.PAPERLANE_ADMISSION_PROMISE_SECONDS = 60
    long_ago = timezone.now() - timedelta(seconds=600)
    in_flight(org, 1, status="processing", due_at=long_ago, lease_owner="job@worker")
    in_flight(org, 1, due_at=timezone.now() - timedelta(seconds=50))
    # Bulk work (connector imports) waits in its own lane: not an upload's promise.
    in_flight(org, 1, due_at=long_ago, priority="bulk", source="connector")

    assert upload(api, make_pdf(1)).status_code == 202


@pytest.mark.django_db(transaction=True)
def test_retry_after_comes_from_the_drain_rate_and_spreads_the_refused(
    api, org, other_org, settings
):
    settings.PAPERLANE_ADMISSION_BACKLOG_BOUND = 4
    in_flight(other_org, 4)
    # 21 runs ended over the last 10 s: 2.1 a second.
    ended_lately(other_org, 21, over_seconds=10)

    waits = [assert_refused(upload(api, make_pdf(1))) for _ in range(5)]

    # One run must end before the first fits, one more for each caller refused before.
    assert waits == [math.ceil(k / 2.1) for k in range(1, 6)], waits
    assert not ImportRun.objects.filter(organisation=org).exists()


# --- The organisation's bound --------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_an_organisation_at_its_bound_is_refused_while_another_is_accepted(
    api, other_api, org, other_org, settings, media_files, tmp_path
):
    settings.PAPERLANE_ADMISSION_ORGANISATION_BOUND = 3
    for _ in range(3):
        accepted_run(api, make_pdf(1))
    # The organisation's own drain: 6 of its runs ended over the last 20 s (0.3 a second);
    # another organisation's quick drain does not shorten its wait.
    ended_lately(org, 6, over_seconds=20)
    ended_lately(other_org, 50, over_seconds=5)
    before, stored, media_root = recorded(org), media_files(), settings.MEDIA_ROOT
    # Refused before storage: with storage unwritable the answer is still the 429.
    blocked = tmp_path / "not-a-folder"
    blocked.write_bytes(b"")
    settings.MEDIA_ROOT = str(blocked)

    refused = upload(api, make_pdf(1))

    assert assert_refused(refused, reason_text="your organisation") == math.ceil(1 / 0.3)
    settings.MEDIA_ROOT = media_root
    assert recorded(org) == before and media_files() == stored
    assert upload(other_api, make_pdf(1)).status_code == 202


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_concurrent_uploads_of_one_organisation_never_pass_its_bound(media_files):
    org = organisation_create(slug="backfill", page_limit=1000)
    _, raw = api_token_create(organisation=org)
    pdf = make_pdf(2)
    barrier = threading.Barrier(24)

    def post(url: str) -> httpx.Response:
        with httpx.Client(timeout=30) as client:
            barrier.wait()
            return client.post(
                url, files={"file": ("doc.pdf", pdf)}, headers={"Authorization": f"Bearer {raw}"}
            )

    site = process_env(PAPERLANE_ADMISSION_ORGANISATION_BOUND="5")
    # The same bytes each time, each a document of its own.
    url = "/api/v1/documents?allow_duplicate=true"
    with web_server(workers=6, threads=4, env=site) as base, ThreadPoolExecutor(24) as pool:
        answers = list(pool.map(post, [f"{base}{url}"] * 24))

    statuses = [a.status_code for a in answers]
    assert statuses.count(202) == 5 and statuses.count(429) == 19, statuses
    for answer in answers:
        if answer.status_code == 429:
            assert_refused(answer, reason_text="your organisation")
    assert ImportRun.objects.filter(organisation=org, status__in=ACTIVE_STATUSES).count() == 5
    org.refresh_from_db()
    assert org.pages_reserved == 10
    # Bytes stored by uploads refused inside the transaction were deleted again.
    assert len(media_files()) == 5


# --- The upload page ---------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("default", "said"), [(120, "2 minutes"), (45, "45 seconds")], ids=["minutes", "seconds"]
)
def test_the_upload_page_says_busy_and_when_to_try_again(
    member_client, org, other_org, settings, default, said, monkeypatch
):
    settings.PAPERLANE_ADMISSION_BACKLOG_BOUND = 2
    monkeypatch.setattr(admission_service, "RETRY_AFTER_DEFAULT_SECONDS", default)
    in_flight(other_org, 2)

    response = member_client.post("/", {"file": SimpleUploadedFile("minutes.pdf", make_pdf(1))})

    assert response.status_code == 429
    assert response["Retry-After"] == str(default)
    page = response.content.decode()
    assert f"The system is busy; please try again in {said}." in page
    assert 'type="file" name="file"' in page
    assert not ImportRun.objects.filter(organisation=org).exists()


# --- Instant, and no storage ----------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_refusal_is_fast_and_never_touches_storage(api, org, other_org, settings, tmp_path):
    settings.PAPERLANE_ADMISSION_BACKLOG_BOUND = 2
    in_flight(other_org, 2)
    ended_lately(other_org, 10, over_seconds=10)
    # Storage that cannot be written: an upload that reached it would fail, not be refused.
    blocked = tmp_path / "not-a-folder"
    blocked.write_bytes(b"")
    settings.MEDIA_ROOT = str(blocked)
    large = make_pdf(300, words_per_page=200)

    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        for _ in range(10):
            assert_refused(upload(api, large))
        elapsed = (time.perf_counter() - started) / 10

    admission = [q for q in queries.captured_queries if "jobs_importrun" in q["sql"]]
    # Per refusal: the backlog's bounded count and the drain rate's latest ends.
    assert len(admission) == 20, [q["sql"] for q in admission]
    assert all("LIMIT" in q["sql"] for q in admission)
    assert elapsed < 0.25, elapsed
    assert blocked.read_bytes() == b""
    assert not Organisation.objects.get(id=org.id).pages_reserved


# --- Redis away, and the count of refusals --------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_with_redis_silent_refusals_stay_quick_and_are_still_spread(
    api, org, other_org, settings, silent_redis
):
    settings.PAPERLANE_ADMISSION_BACKLOG_BOUND = 2
    in_flight(other_org, 2)
    ended_lately(other_org, 11, over_seconds=10)

    started = time.perf_counter()
    waits = [assert_refused(upload(api, make_pdf(1))) for _ in range(3)]

    assert time.perf_counter() - started < 2
    assert waits == [1, 2, 3]


@pytest.mark.django_db(transaction=True)
def test_refusals_are_counted_by_reason_in_the_metrics(api, org, other_org, settings, operator):
    settings.PAPERLANE_ADMISSION_ORGANISATION_BOUND = 1
    accepted_run(api, make_pdf(1))
    upload(api, make_pdf(1))
    upload(api, make_pdf(1))
    settings.PAPERLANE_ADMISSION_BACKLOG_BOUND = 1
    upload(api, make_pdf(1))

    response = operator.get("/metrics")

    samples = {
        (s.name, s.labels.get("reason")): s.value
        for family in text_string_to_metric_families(response.content.decode())
        for s in family.samples
    }
    assert samples[("paperlane_uploads_refused_total", "organisation")] == 2
    assert samples[("paperlane_uploads_refused_total", "backlog")] == 1
    assert samples[("paperlane_uploads_refused_total", "late")] == 0
