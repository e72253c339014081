"""Lanes: where stage jobs go (by priority, and per organisation) and the order a
worker takes them in, with real Redis and RQ's own dequeue."""

import uuid

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from rq.job import Job
from rq.worker import SimpleWorker

from core.redis import redis_connection
from pipeline import dispatch, rq_workers
from pipeline.broker import get_queue
from pipeline.dispatch import delivery_of, enqueue_current, job_state, stage_redeliver
from pipeline.lanes import lane_choose
from pipeline.models import ImportRun, RunPriority, RunSource
from pipeline.queues import priority_queue_names, queue_for, queue_lane, stage_queue_names
from pipeline.rq_workers import ForkingLaneWorker, LaneWorker, lane_worker_class
from pipeline.services.accept import document_accept
from pipeline.stage_list import first_stage
from pipeline.supervisor import default_children
from tests.support.files import make_pdf
from tests.support.lanes import lane_of, picks, waiting_job_ids
from tests.support.runs import unchecked_run

pytestmark = pytest.mark.django_db

INTERACTIVE, BULK = RunPriority.INTERACTIVE, RunPriority.BULK


def enqueue_pick(stage: str, priority: str, organisation, label: str) -> str:
    """A `record_pick` job routed the way stage jobs are; returns its lane."""
    lane = lane_choose(
        connection=redis_connection(), stage=stage, priority=priority, organisation_id=organisation
    )
    get_queue(lane).enqueue("tests.support.lanes.record_pick", label)
    return lane


def drain(stage: str, *, prefers: str = INTERACTIVE, worker_class=LaneWorker) -> list[str]:
    """Let one worker of `stage` take every job there is, in its own order."""
    queues = [
        get_queue(name) for p in (INTERACTIVE, BULK) for name in priority_queue_names(stage, p)
    ]
    if prefers == BULK:
        queues = queues[len(queues) // 2 :] + queues[: len(queues) // 2]
    worker_class(queues, connection=redis_connection(), prefers=prefers).work(burst=True)
    return picks()


def accept(org, source: str) -> ImportRun:
    upload = SimpleUploadedFile("doc.pdf", make_pdf(1), content_type="application/pdf")
    return document_accept(organisation=org, upload=upload, source=source).run


# --- Routing -----------------------------------------------------------------------------


@pytest.mark.parametrize("source", [RunSource.WEB, RunSource.API])
def test_uploads_from_people_and_the_api_go_to_interactive_lanes(
    org, redis_conn, source, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        run = accept(org, source)

    lane = queue_lane(lane_of(delivery_job(run)).name)
    assert (lane.stage, lane.priority) == (first_stage(source), INTERACTIVE)


def delivery_job(run: ImportRun) -> str:
    [job_id] = waiting_job_ids(run.stage)
    return job_id


@pytest.mark.parametrize(
    ("source", "priority"),
    [
        (RunSource.CONNECTOR, RunPriority.BULK),
        (RunSource.CONNECTOR, RunPriority.INTERACTIVE),
        (RunSource.API, RunPriority.BULK),
    ],
)
def test_connector_imports_and_bulk_runs_go_to_bulk_lanes(org, redis_conn, source, priority):
    run = unchecked_run(org, make_pdf(1), kind="pdf", pages=1)
    ImportRun.objects.filter(id=run.id).update(source=source, priority=priority)
    run.refresh_from_db()

    assert enqueue_current(run)

    lane = queue_lane(lane_of(delivery_job(run)).name)
    assert (lane.stage, lane.priority) == (run.stage, BULK)


def test_an_organisation_keeps_its_lane_while_it_holds_jobs_and_others_get_their_own(
    redis_conn,
):
    a, b, c = (str(uuid.uuid4()) for _ in range(3))
    first = enqueue_pick("extract", INTERACTIVE, a, "a0")

    assert {enqueue_pick("extract", INTERACTIVE, a, f"a{n}") for n in range(1, 20)} == {first}
    second = enqueue_pick("extract", INTERACTIVE, b, "b0")
    third = enqueue_pick("extract", INTERACTIVE, c, "c0")
    assert len({first, second, third}) == 3

    get_queue(first).empty()
    # Its lane is empty: the organisation takes the shortest lane (an empty one) again.
    moved = enqueue_pick("extract", INTERACTIVE, a, "a20")
    assert moved not in {second, third}


# --- The order a worker takes them in ------------------------------------------------------


def test_organisations_take_turns_so_a_single_upload_is_not_stuck_behind_a_backfill(redis_conn):
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    for n in range(30):
        enqueue_pick("extract", INTERACTIVE, a, f"a{n}")
    enqueue_pick("extract", INTERACTIVE, b, "b")

    taken = drain("extract")

    assert len(taken) == 31
    assert taken.index("b") <= 1


@pytest.mark.parametrize(
    "worker_class",
    # In-process (the default), forking, and a plain RQ class named in the setting.
    [LaneWorker, ForkingLaneWorker, lane_worker_class(SimpleWorker)],
    ids=["LaneWorker", "ForkingLaneWorker", "SimpleWorker"],
)
def test_a_worker_serves_the_lanes_in_turn(redis_conn, worker_class):
    # Straight into lanes 0, 3 and 5: the worker's order alone decides.
    for lane, labels in [(0, ["a0", "a1", "a2", "a3"]), (3, ["b0", "b1"]), (5, ["c0"])]:
        for label in labels:
            queue = get_queue(queue_for("extract", INTERACTIVE, lane))
            queue.enqueue("tests.support.lanes.record_pick", label)

    assert drain("extract", worker_class=worker_class) == ["a0", "b0", "c0", "a1", "b1", "a2", "a3"]


def test_bulk_work_moves_every_nth_pick_while_interactive_work_waits(redis_conn, monkeypatch):
    monkeypatch.setattr(rq_workers, "BULK_EVERY", 4)
    org = str(uuid.uuid4())
    for n in range(12):
        enqueue_pick("embed", INTERACTIVE, org, f"i{n}")
    for n in range(3):
        enqueue_pick("embed", BULK, org, f"b{n}")

    taken = drain("embed")

    assert [n for n, label in enumerate(taken) if label.startswith("b")] == [3, 7, 11]


def test_a_bulk_first_worker_takes_bulk_first_then_interactive_work(redis_conn):
    org = str(uuid.uuid4())
    for n in range(3):
        enqueue_pick("store", INTERACTIVE, org, f"i{n}")
    for n in range(3):
        enqueue_pick("store", BULK, org, f"b{n}")

    assert drain("store", prefers=BULK) == ["b0", "b1", "b2", "i0", "i1", "i2"]


def test_an_interactive_first_worker_takes_bulk_work_when_there_is_no_other(redis_conn):
    org = str(uuid.uuid4())
    for n in range(5):
        enqueue_pick("settle", BULK, org, f"b{n}")

    assert drain("settle") == [f"b{n}" for n in range(5)]


# --- Finding and repairing jobs in lanes ---------------------------------------------------


def test_job_state_finds_a_job_in_its_lane(org, redis_conn):
    runs = [unchecked_run(org, make_pdf(1), kind="pdf", pages=1) for _ in range(2)]
    for run in runs:
        assert enqueue_current(run)

    state = job_state(runs[1])

    assert state.status == "queued" and state.waiting
    assert state.queue == lane_of(delivery_job_of(runs[1])).name
    assert state.position == 2  # one organisation: one lane, in order


def delivery_job_of(run: ImportRun) -> str:
    return f"run-{run.id}-0-{run.stage}-0"


def test_redelivery_finds_a_job_gone_from_its_lane_and_queues_it_again(
    org, redis_conn, monkeypatch
):
    run = unchecked_run(org, make_pdf(1), kind="pdf", pages=1)
    assert enqueue_current(run)
    job_id = delivery_job_of(run)
    assert redis_conn.lrem(lane_of(job_id).key, 0, job_id) == 1
    # Out of its lane moments after it was enqueued, as a worker's pop leaves it: taken.
    assert job_state(run).being_taken and job_state(run).waiting
    assert not stage_redeliver(delivery=delivery_of(run))
    assert redis_conn.exists(f"rq:job:{job_id}") and waiting_job_ids(run.stage) == []
    # Out of every list for longer than a worker takes to start a job it popped: lost.
    monkeypatch.setattr(dispatch, "STRANDED_AFTER_SECONDS", 0)
    assert job_state(run).stranded

    assert stage_redeliver(delivery=delivery_of(run))

    assert waiting_job_ids(run.stage) == [job_id]
    assert job_state(run).waiting


def test_a_job_in_a_queue_no_worker_reads_is_stranded_and_redelivered_to_a_lane(
    org, redis_conn, settings
):
    settings.PAPERLANE_LANES = 8
    run = unchecked_run(org, make_pdf(1), kind="pdf", pages=1)
    job_id = delivery_job_of(run)
    # In a queue named after the stage alone, which no worker reads, as in a lane a
    # lowered PAPERLANE_LANES no longer has.
    get_queue(run.stage).enqueue(
        "pipeline.engine.execute_stage", str(run.id), run.stage, job_id=job_id
    )
    assert job_state(run).stranded

    assert stage_redeliver(delivery=delivery_of(run))

    assert waiting_job_ids(run.stage) == [job_id]
    assert get_queue(run.stage).job_ids == []
    assert queue_lane(Job.fetch(job_id, connection=redis_conn).origin).priority == INTERACTIVE


# --- Settings and the worker processes ---------------------------------------------------


def test_worker_counts_per_stage_and_priority_come_from_the_settings(settings):
    settings.PAPERLANE_STAGE_CONCURRENCY = {"extract": 3}
    settings.PAPERLANE_STAGE_BULK_CONCURRENCY = {"extract": 2, "embed": 1}

    children = default_children()

    workers = [c for c in children if "stage_worker" in c.argv]
    by_name = {c.name: c.argv[c.argv.index("stage_worker") + 1 :] for c in workers}
    assert [n for n in by_name if n.startswith("extract")] == [
        "extract-1",
        "extract-2",
        "extract-3",
        "extract-bulk-1",
        "extract-bulk-2",
    ]
    assert by_name["extract-3"] == ["extract", "--prefers", "interactive"]
    assert by_name["embed-bulk-1"] == ["embed", "--prefers", "bulk"]
    assert sum(1 for n in by_name if n.startswith("create")) == 1  # the default, bulk 0


def test_a_lane_count_below_one_is_refused_with_a_clear_error(settings):
    settings.PAPERLANE_LANES = 0
    with pytest.raises(ImproperlyConfigured, match="PAPERLANE_LANES"):
        stage_queue_names("create")


def test_a_worker_for_an_unknown_stage_is_refused():
    with pytest.raises(CommandError, match="unknown stage extrakt"):
        call_command("stage_worker", "extrakt", "--burst")
