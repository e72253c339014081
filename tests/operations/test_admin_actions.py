"""Operators act on runs in the admin: requeue, retry, cancel, dead-letter.

Each action is confirmed with a reason, decided again by its service under the run's
row lock, logged (LogEntry) and recorded in the run's history (RunTransition). The
races are real: two threads on two database connections.
"""

import html
import re
import threading

import pytest
from django.contrib.admin.models import LogEntry
from django.db import connection, transaction
from django.db.models import Sum
from django.test import Client

from documents.models import Organisation, QuotaReservation, UsageEntry
from documents.services.quota import quota_settle
from operations.admin import run_actions as admin_actions
from operations.admin import runs as jobs_admin
from pipeline.broker import get_queue
from pipeline.dispatch import stage_enqueue, stage_job_id
from pipeline.engine import execute_stage
from pipeline.errors import LeaseLost
from pipeline.models import ImportRun, RunSource, RunTransition, StageAttempt
from pipeline.queues import stage_queue_names
from pipeline.services.workers import (
    Failure,
    run_claim,
    run_complete_stage,
    run_record_failure,
    run_record_lost_hold,
    run_set_progress,
)
from pipeline.stage_list import first_stage
from tests.support.admin import RUNS, act, make_runs, operator_client
from tests.support.files import make_pdf
from tests.support.lanes import waiting_count, waiting_job_ids
from tests.support.locks import wait_for_lock_waiters
from tests.support.pipeline import running_workers, wait_terminal
from tests.support.runs import drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)

# The stage a new upload is due at (its bytes are stored at accept).
FIRST = first_stage(RunSource.API)


def text(response) -> str:
    """The page's text, tags removed and spaces collapsed, for reading sentences."""
    body = re.sub(r"<[^>]+>", " ", response.content.decode())
    return re.sub(r"\s+", " ", html.unescape(body))


def outcomes(response) -> dict[str, str]:
    """{run id: outcome} from an action's result page."""
    rows = re.findall(
        r"<tr><td><a [^>]+>([0-9a-f-]{36})</a></td><td>[^<]*</td><td>([a-z ]+)</td>",
        response.content.decode(),
    )
    return dict(rows)


def confirm(client: Client, url: str, reason: str):
    """Open a confirmation page and confirm it as shown (its runs, its form)."""
    page = client.get(url)
    assert page.status_code == 200
    body = page.content.decode()
    target = re.search(r'<form method="post" action="([^"]+)"', body).group(1)
    runs = re.search(r'name="runs" value="([^"]*)"', body).group(1)
    return client.post(target, {"runs": runs, "reason": reason})


def assert_quota_consistent(organisation: Organisation) -> None:
    """The organisation's totals are the sum of its held reservations and its ledger."""
    organisation.refresh_from_db()
    held = QuotaReservation.objects.filter(organisation=organisation, status="held")
    used = UsageEntry.objects.filter(organisation=organisation)
    assert organisation.pages_reserved == (held.aggregate(n=Sum("pages"))["n"] or 0)
    assert organisation.pages_used == (used.aggregate(n=Sum("pages"))["n"] or 0)


# --- Requeue -----------------------------------------------------------------------------


@pytest.mark.slow
def test_requeue_delivers_a_run_whose_job_was_lost_and_the_run_succeeds(
    api, org, operator, redis_conn
):
    run = accepted_run(api, make_pdf(2))
    redis_conn.flushdb()  # Redis lost the job the accept path queued

    confirmation = operator.get(f"{RUNS}act/requeue/?runs={run.id}")
    result = act(operator, "requeue", [run], reason="redis was flushed")

    assert "1 run will be requeued; 0 will be left alone" in text(confirmation)
    assert "missing from Redis" in text(confirmation)
    assert outcomes(result) == {str(run.id): "changed"}
    # Delivered by the requeue itself, before any worker or sweeper runs.
    assert waiting_job_ids(FIRST) == [stage_job_id(run_id=run.id, stage=FIRST, attempt=0)]
    with running_workers():
        finished = wait_terminal([run.id], timeout=60)[run.id]
    assert finished.status == "succeeded", finished.error_message
    assert [e.pages for e in UsageEntry.objects.filter(document=run.document_id)] == [2]


def test_requeue_leaves_a_running_stage_alone_and_says_why(api, org, operator):
    run = accepted_run(api, make_pdf(1))
    for name in stage_queue_names(FIRST):
        get_queue(name).empty()
    run_claim(run_id=run.id, stage=FIRST, job_id="job-1", worker=f"host.1.{FIRST}")
    before = ImportRun.objects.get(id=run.id)
    history = RunTransition.objects.filter(run=run).count()

    result = act(operator, "requeue", [run], reason="looks stuck")

    assert outcomes(result) == {str(run.id): "left alone"}
    assert f"its {FIRST} stage is running on host.1.{FIRST} (lease live until" in text(result)
    after = ImportRun.objects.get(id=run.id)
    assert (after.updated_at, after.lease_owner) == (before.updated_at, before.lease_owner)
    assert RunTransition.objects.filter(run=run).count() == history
    assert not LogEntry.objects.filter(object_id=str(run.id)).exists()
    assert waiting_count(FIRST) == 0


def test_requeue_leaves_a_run_whose_job_is_waiting_alone(api, org, operator):
    waiting = accepted_run(api, make_pdf(1))  # its job is queued in Redis

    result = act(operator, "requeue", [waiting])

    assert outcomes(result) == {str(waiting.id): "left alone"}
    assert re.search(rf"its job is queued in {FIRST}\.interactive\.\d at position 1", text(result))
    assert waiting_count(FIRST) == 1


# --- Retry, cancel, dead-letter ----------------------------------------------------------


def test_retry_of_a_dead_lettered_run_whose_cause_is_gone_succeeds_and_charges_once(
    api, org, operator, settings
):
    settings.PAPERLANE_EMBEDDER = "tests.support.embedders.AlwaysBusyEmbedder"
    settings.PAPERLANE_RETRY_MAX_ATTEMPTS = 1
    run = drive(accepted_run(api, make_pdf(2)).id)
    assert run.status == "dead_letter"
    settings.PAPERLANE_EMBEDDER = "retrieval.embedding.HashingEmbedder"

    result = act(operator, "retry", [run], reason="the provider is back")
    finished = drive(run.id)

    assert outcomes(result) == {str(run.id): "changed"}
    assert finished.status == "succeeded"
    assert [e.pages for e in UsageEntry.objects.filter(document=run.document_id)] == [2]
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (2, 0)
    assert_quota_consistent(org)


def test_retry_is_refused_with_the_quota_message_when_the_pages_no_longer_fit(api, org, operator):
    run = accepted_run(api, make_pdf(3))
    act(operator, "cancel", [run])
    Organisation.objects.filter(id=org.id).update(page_limit=2)

    confirmation = operator.get(f"{RUNS}act/retry/?runs={run.id}")
    result = act(operator, "retry", [run], reason="try again")

    assert "it needs 3 pages and acme has 2 left" in text(confirmation)
    assert outcomes(result) == {str(run.id): "refused"}
    assert "needs 3 pages but only 2 of your page quota are left" in text(result)
    run.refresh_from_db()
    assert (run.status, run.reservation.status) == ("cancelled", "released")
    assert_quota_consistent(org)


def test_cancel_gives_the_reservation_back(api, org, operator):
    run = accepted_run(api, make_pdf(4))
    org.refresh_from_db()
    assert org.pages_reserved == 4

    result = act(operator, "cancel", [run], reason="customer asked")

    assert outcomes(result) == {str(run.id): "changed"}
    run.refresh_from_db()
    assert (run.status, run.reservation.status) == ("cancelled", "released")
    org.refresh_from_db()
    assert org.pages_reserved == 0
    assert execute_stage(str(run.id), FIRST)["outcome"] == "skipped"


def test_a_dead_lettered_run_stays_out_whatever_its_worker_does_next(api, org, operator):
    run = accepted_run(api, make_pdf(1))
    claim = run_claim(run_id=run.id, stage=FIRST, job_id="job-1", worker=f"host.1.{FIRST}")

    result = act(operator, "dead_letter", [run], reason="poisonous file")

    assert outcomes(result) == {str(run.id): "changed"}
    # The worker, still running, reports, completes, fails or renews: all refused.
    with pytest.raises(LeaseLost):
        run_set_progress(claim=claim, done=1, total=2)
    with pytest.raises(LeaseLost), transaction.atomic():
        run_complete_stage(claim=claim)
    failure = Failure(detail="boom")
    assert (
        run_record_failure(
            claim=claim,
            outcome="transient_error",
            code="x",
            message="X",
            failure=failure,
            permanent=False,
        )
        is None
    )
    assert execute_stage(str(run.id), FIRST)["outcome"] == "skipped"
    run.refresh_from_db()
    assert (run.status, run.lease_owner, run.reservation.status) == ("dead_letter", "", "released")
    # The worker, stopping at that refusal, says why its attempt ended.
    assert run_record_lost_hold(claim=claim) == "stopped"
    attempt = StageAttempt.objects.get(id=claim.attempt.id)
    assert attempt.outcome == "stopped" and "dead-lettered by user:" in attempt.error_message
    assert_quota_consistent(org)


@pytest.mark.parametrize("stage", ["extract", "settle"])
def test_a_worker_finishing_as_the_operator_dead_letters_never_resurrects_or_undoes_it(
    api, org, operator, stage
):
    run = accepted_run(api, make_pdf(1))
    stages_before = {"extract": [], "settle": ["extract", "embed"]}[stage]
    for earlier in stages_before:
        assert execute_stage(str(run.id), earlier)["outcome"] == "succeeded"
    claim = run_claim(run_id=run.id, stage=stage, job_id="job-1", worker="host.1.w")
    holding, order = threading.Event(), []

    def worker_finishes():
        try:
            # As the engine completes a stage: the run first (its row lock), then the
            # stage's own rows, in one transaction.
            with transaction.atomic():
                # As extract completes a PDF with text: past OCR, to embed.
                run_complete_stage(claim=claim, skip=frozenset({"ocr"}))
                holding.set()
                # Goes on once the operator's dead-letter waits on the run's row lock.
                wait_for_lock_waiters(1, like='SELECT "jobs_importrun"."id"%', timeout=10)
                order.append("worker goes on")
                if stage == "settle":
                    quota_settle(
                        reservation=claim.run.reservation, document=claim.run.document, pages=1
                    )
        finally:
            connection.close()

    worker = threading.Thread(target=worker_finishes)
    worker.start()
    assert holding.wait(5)
    order.append("operator acts")
    result = act(operator, "dead_letter", [run], reason="poisonous file")
    worker.join()

    assert order == ["operator acts", "worker goes on"]  # the two met on the run's lock
    run.refresh_from_db()
    if stage == "extract":
        # The worker's stage counted; the run was then taken out at the next one.
        assert outcomes(result) == {str(run.id): "changed"}
        assert (run.status, run.stage, run.lease_owner) == ("dead_letter", "embed", "")
        assert execute_stage(str(run.id), "embed")["outcome"] == "skipped"
        assert run.reservation.status == "released"
    else:
        # The worker settled first: the run succeeded and was charged; nothing undoes it.
        assert outcomes(result) == {str(run.id): "refused"}
        assert "already ended (succeeded)" in text(result)
        assert (run.status, run.reservation.status) == ("succeeded", "settled")
        assert [e.pages for e in UsageEntry.objects.filter(document=run.document_id)] == [1]
    assert_quota_consistent(org)


# --- Safe to repeat, safe to race --------------------------------------------------------


def test_a_double_click_on_retry_retries_once(org, operator):
    run = make_runs(org, 1, status="dead_letter", stage="embed", error_code="poison")[0]

    first = act(operator, "retry", [run], reason="once")
    second = act(operator, "retry", [run], reason="once")

    assert outcomes(first) == {str(run.id): "changed"}
    assert outcomes(second) == {str(run.id): "left alone"}
    assert "already in the pipeline" in text(second)
    run.refresh_from_db()
    assert (run.status, run.generation, run.reservation.status) == ("queued", 1, "held")
    assert RunTransition.objects.filter(run=run, reason="once").count() == 1
    assert LogEntry.objects.filter(object_id=str(run.id)).count() == 1
    assert_quota_consistent(org)


def race(*actions) -> list:
    """Start `actions` at the same moment, each in its own thread and connection."""
    barrier, results = threading.Barrier(len(actions)), [None] * len(actions)

    def go(index, action):
        try:
            barrier.wait()
            results[index] = action()
        finally:
            connection.close()

    threads = [threading.Thread(target=go, args=pair) for pair in enumerate(actions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_two_operators_retrying_at_once_retry_once(org):
    operators = [operator_client(org, "olga"), operator_client(org, "omar")]
    runs = make_runs(org, 5, status="dead_letter", stage="embed", error_code="poison")

    for run in runs:
        results = race(
            *(
                lambda client=client, run=run: act(client, "retry", [run], "same time")
                for client in operators
            )
        )
        assert sorted(outcomes(r)[str(run.id)] for r in results) == ["changed", "left alone"]
        run.refresh_from_db()
        assert (run.status, run.generation, run.reservation.status) == ("queued", 1, "held")
        assert RunTransition.objects.filter(run=run, reason="same time").count() == 1
        assert LogEntry.objects.filter(object_id=str(run.id)).count() == 1
    assert_quota_consistent(org)


@pytest.mark.parametrize("start", ["dead_letter", "queued"])
def test_a_retry_racing_a_cancel_leaves_the_run_consistent(org, start):
    operators = [operator_client(org, "olga"), operator_client(org, "omar")]
    runs = make_runs(org, 5, status=start, stage="embed", held=start == "queued")

    for run in runs:
        retried, cancelled = race(
            lambda run=run: act(operators[0], "retry", [run], reason="retry in the race"),
            lambda run=run: act(operators[1], "cancel", [run], reason="cancel in the race"),
        )
        assert retried.status_code == cancelled.status_code == 200
        run.refresh_from_db()
        run.reservation.refresh_from_db()
        assert run.status in {"queued", "cancelled"}
        assert (run.reservation.status == "held") == (run.status == "queued")
        assert run.generation <= 1
        assert_quota_consistent(org)
    # Whoever won, totals held: no page lost or counted twice across all rounds.
    assert not UsageEntry.objects.exists()


# --- Reasons, logs, confirmation ---------------------------------------------------------


@pytest.mark.parametrize(
    "action,start",
    [
        ("requeue", {"status": "queued", "stage": FIRST}),
        ("retry", {"status": "dead_letter", "stage": "embed", "error_code": "poison"}),
        ("cancel", {"status": "queued", "stage": FIRST}),
        ("dead_letter", {"status": "processing", "stage": "embed"}),
    ],
)
def test_every_action_leaves_a_log_entry_and_a_transition_with_the_reason(
    org, operator, action, start
):
    run = make_runs(org, 1, held=start["status"] != "dead_letter", **start)[0]

    result = act(operator, action, [run], reason="ticket OPS-42")

    assert outcomes(result) == {str(run.id): "changed"}
    label = admin_actions.ACTIONS[action].label
    entry = LogEntry.objects.get(object_id=str(run.id))
    assert (entry.user.username, entry.get_change_message()) == ("olga", f"{label}: ticket OPS-42")
    transition = RunTransition.objects.filter(run=run).latest("created_at")
    assert "ticket OPS-42" in transition.reason
    assert (transition.actor_label, transition.actor.username) == ("user:olga", "olga")


def test_the_list_action_confirms_what_will_happen_and_needs_a_reason(org, operator):
    queued = make_runs(org, 3, status="queued", stage=FIRST, held=True)
    done = make_runs(org, 1, name="done")
    selected = [str(r.id) for r in [*queued, *done]]

    page = operator.post(
        RUNS, {"action": "cancel_selected", "_selected_action": selected, "index": "0"}
    )
    nothing = operator.post(f"{RUNS}act/cancel/", {"runs": " ".join(selected), "reason": ""})

    assert "3 runs will be cancelled; 1 will be left alone" in text(page)
    assert "it has ended (succeeded)" in text(page)
    assert "This field is required" in text(nothing)
    assert ImportRun.objects.filter(status="queued").count() == 3
    assert not LogEntry.objects.exists()


def test_an_action_works_on_a_bounded_number_of_runs_and_says_so(org, operator, monkeypatch):
    monkeypatch.setattr(admin_actions, "MAX_RUNS_PER_ACTION", 2)
    monkeypatch.setattr(jobs_admin, "MAX_RUNS_PER_ACTION", 2)
    runs = make_runs(org, 3, status="queued", stage=FIRST, held=True)

    page = operator.get(f"{RUNS}act/cancel/?runs={','.join(str(r.id) for r in runs)}")
    result = confirm(
        operator, f"{RUNS}act/cancel/?runs={','.join(str(r.id) for r in runs)}", "bounded"
    )

    assert "More than 2 runs were chosen: this works on the oldest 2" in text(page)
    assert list(outcomes(result).values()) == ["changed", "changed"]
    assert ImportRun.objects.filter(status="queued").count() == 1


# --- The dead letter view ----------------------------------------------------------------


def test_the_dead_letter_view_groups_runs_by_error_code_and_stage(org, operator):
    make_runs(org, 3, status="dead_letter", stage="embed", error_code="transient_error")
    make_runs(org, 2, status="failed", stage="embed", error_code="transient_error", name="f")
    make_runs(org, 1, status="dead_letter", stage="extract", error_code="poison", name="p")
    make_runs(org, 1, status="dead_letter", stage="store", error_code="transient_error", name="s")
    make_runs(org, 4, name="fine")

    page = operator.get(f"{RUNS}dead-letter/")
    rows = re.findall(
        r"<tr>\s*<td><code>([^<]+)</code></td>\s*<td>(\w+)</td>\s*"
        r'<td class="num"><a [^>]+>(\d+)</a></td>\s*<td class="num"><a [^>]+>(\d+)</a></td>',
        page.content.decode(),
    )

    assert rows == [
        ("transient_error", "embed", "3", "2"),
        ("poison", "extract", "1", "0"),
        ("transient_error", "store", "1", "0"),
    ]
    assert f"{RUNS}?" in page.content.decode()  # reachable from the runs list and back
    assert "dead-letter/" in operator.get(RUNS).content.decode()


def test_retry_all_in_a_group_retries_it_and_reports_runs_whose_pages_no_longer_fit(org, operator):
    group = make_runs(org, 3, status="dead_letter", stage="embed", error_code="transient_error")
    # The same error at another stage is another group.
    other = make_runs(
        org, 1, status="dead_letter", stage="extract", error_code="transient_error", name="p"
    )
    Organisation.objects.filter(id=org.id).update(page_limit=2)
    url = f"{RUNS}dead-letter/retry/?error_code=transient_error&stage=embed"

    page = operator.get(url)
    result = confirm(operator, url, reason="provider outage is over")

    assert "2 runs will be retried; 1 will be left alone" in text(page)
    assert "it needs 1 pages and acme has 0 left" in text(page)
    assert sorted(outcomes(result).values()) == ["changed", "changed", "refused"]
    assert "only 0 of your page quota are left" in text(result)
    statuses = sorted(
        ImportRun.objects.filter(id__in=[r.id for r in group]).values_list("status", flat=True)
    )
    assert statuses == ["dead_letter", "queued", "queued"]
    assert ImportRun.objects.get(id=other[0].id).status == "dead_letter"
    assert_quota_consistent(org)


def test_a_requeued_stage_is_enqueued_once_however_often_it_is_asked(org, operator):
    run = make_runs(org, 1, status="queued", stage=FIRST, held=True)[0]

    race(
        lambda: act(operator_client(org, "ann"), "requeue", [run]),
        lambda: act(operator_client(org, "bob"), "requeue", [run]),
    )

    job = stage_job_id(run_id=run.id, stage=FIRST, attempt=0)
    assert waiting_job_ids(FIRST) == [job]
    # A third ask finds the job waiting.
    assert outcomes(act(operator, "requeue", [run])) == {str(run.id): "left alone"}
    assert not stage_enqueue(run_id=run.id, stage=FIRST, attempt=0)
