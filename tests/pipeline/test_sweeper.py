"""The sweeper against the real test database and Redis, one pass at a time."""

import io
import os
import subprocess
import sys
import time
import uuid
from datetime import timedelta

import pytest
from django.core.files.storage import default_storage
from django.core.management import call_command
from django.utils import timezone
from rq.job import Job
from rq.utils import utcformat

from connectors.models import ConnectionSync
from connectors.services import SYNCS_ALWAYS_KEPT, connection_create_local
from core.redis import redis_connection
from documents.models import Document, QuotaReservation
from documents.storage import document_storage_key, storage_delete, storage_put
from pipeline import lease
from pipeline.broker import get_queue
from pipeline.dispatch import stage_job_id
from pipeline.lag import LAG_KEY
from pipeline.models import ImportRun, RunSource, StageAttempt
from pipeline.queues import queue_for
from pipeline.services.people import run_cancel
from pipeline.services.transitions import Actor
from pipeline.services.workers import run_claim
from pipeline.stage_list import first_stage, stage_spec
from pipeline.sweeper import (
    CHECK_LOCK_KEY,
    HOUSEKEEPING_LOCK_KEY,
    MARKER_KEY,
    ORPHANS_RESUME_KEY,
    redis_lost_data,
    sweep_once,
)
from tests.support.files import make_pdf
from tests.support.lanes import lane_of, scheduled_job_ids, waiting_job_ids
from tests.support.pipeline import wait_for
from tests.support.processes import ROOT, free_port, process_env, stop_group
from tests.support.runs import drive
from tests.support.storage import storage_exists
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)

# The stage an upload is due at once accepted, and its worker's name.
FIRST = first_stage(RunSource.API)
WORKER = f"host.1.{FIRST}"


def upload(api) -> ImportRun:
    return accepted_run(api, make_pdf(2))


def age(run: ImportRun, seconds: int = 5) -> None:
    ImportRun.objects.filter(id=run.id).update(
        updated_at=timezone.now() - timedelta(seconds=seconds)
    )


def first_job_id(run: ImportRun) -> str:
    return stage_job_id(run_id=run.id, stage=FIRST, attempt=0)


def enqueued_long_ago(job_id: str, seconds: int = 3600) -> None:
    """Make a job look as if it had waited in its queue for `seconds`."""
    stamp = utcformat(timezone.now() - timedelta(seconds=seconds))
    redis_connection().hset(f"rq:job:{job_id}", "enqueued_at", stamp)


def store(key: str, *, written_ago: int = 0) -> str:
    storage_put(key=key, content=io.BytesIO(make_pdf(1)))
    if written_ago:
        backdate(key, seconds=written_ago)
    return key


def backdate(key: str, *, seconds: int) -> None:
    stamp = time.time() - seconds
    os.utime(default_storage.path(key), (stamp, stamp))


def key_without_document(org, *, version: int = 1, document_id: uuid.UUID | None = None) -> str:
    return document_storage_key(
        organisation_id=org.id,
        document_id=document_id or uuid.uuid4(),
        version=version,
        kind="pdf",
    )


HOURS = 3600


def test_it_redelivers_a_due_stage_whose_job_redis_lost(api):
    run = upload(api)
    redis_connection().flushdb()
    age(run)

    assert sweep_once().redelivered == 1
    assert waiting_job_ids(FIRST) == [stage_job_id(run_id=run.id, stage=FIRST, attempt=0)]
    assert sweep_once().redelivered == 0  # the job is waiting now


def test_it_leaves_a_job_that_is_waiting_in_a_long_queue(api):
    run = upload(api)
    age(run, seconds=3600)
    enqueued_long_ago(first_job_id(run))

    assert sweep_once().redelivered == 0


def test_it_redelivers_a_scheduled_retry_at_its_time(api):
    run = upload(api)
    due = timezone.now() + timedelta(seconds=30)
    ImportRun.objects.filter(id=run.id).update(due_at=due, status="processing")
    redis_connection().flushdb()
    age(run)

    assert sweep_once().redelivered == 1
    scheduled = scheduled_job_ids(FIRST)
    assert scheduled == [stage_job_id(run_id=run.id, stage=FIRST, attempt=0)]


def test_an_expired_lease_is_recorded_as_abandoned_and_made_due_again(api, settings):
    run = upload(api)
    claim = run_claim(run_id=run.id, stage=FIRST, job_id="job-1", worker=WORKER)
    ImportRun.objects.filter(id=run.id).update(
        lease_expires_at=timezone.now() - timedelta(seconds=1)
    )

    report = sweep_once()

    assert report.abandoned == 1
    run.refresh_from_db()
    assert (run.lease_owner, run.crashes, run.status) == ("", 1, "processing")
    assert StageAttempt.objects.get(id=claim.attempt.id).outcome == "abandoned"
    abandoned = StageAttempt.objects.get(id=claim.attempt.id)
    assert (abandoned.error_code, abandoned.outcome) == ("worker_lost", "abandoned")
    assert "stopped responding" in abandoned.error_message
    assert run.error_message == "The extract step was interrupted; it is resuming elsewhere."


def test_a_stage_that_keeps_losing_its_worker_becomes_dead_letter(api, settings):
    settings.PAPERLANE_POISON_CRASHES = 2
    run = upload(api)
    for n in (1, 2):
        run_claim(run_id=run.id, stage=FIRST, job_id=f"job-{n}", worker=WORKER)
        ImportRun.objects.filter(id=run.id).update(
            lease_expires_at=timezone.now() - timedelta(seconds=1)
        )
        sweep_once()

    run.refresh_from_db()
    assert (run.status, run.error_code) == ("dead_letter", "poison")
    assert QuotaReservation.objects.get(run=run).status == "released"


def test_a_live_lease_is_left_alone(api):
    run = upload(api)
    run_claim(run_id=run.id, stage=FIRST, job_id="job-1", worker=WORKER)

    assert sweep_once().abandoned == 0
    run.refresh_from_db()
    assert run.lease_owner.startswith("job-1@")


def test_an_attempt_left_running_by_a_worker_that_died_after_a_cancel_is_closed_later(
    api, settings
):
    run = upload(api)
    claim = run_claim(run_id=run.id, stage=FIRST, job_id="job-1", worker=WORKER)
    run_cancel(run=run, actor=Actor("user:alice"))  # its worker is left to close it
    sweep_once()
    assert StageAttempt.objects.get(id=claim.attempt.id).outcome == "running"
    # Past its stage's timeout, the hung margin and a lease, no worker can be at it.
    past = stage_spec(FIRST).timeout + lease.HUNG_MARGIN_SECONDS
    past += settings.PAPERLANE_LEASE_SECONDS
    StageAttempt.objects.filter(id=claim.attempt.id).update(
        started_at=timezone.now() - timedelta(seconds=past + 1)
    )

    assert sweep_once().attempts_closed == 1

    attempt = StageAttempt.objects.get(id=claim.attempt.id)
    assert (attempt.outcome, attempt.error_code) == ("abandoned", "worker_lost")
    assert attempt.finished_at is not None


def test_it_releases_pages_held_by_a_run_that_ended_without_settling(api, org):
    run = upload(api)
    ImportRun.objects.filter(id=run.id).update(status="failed")

    assert sweep_once().released == 1
    org.refresh_from_db()
    assert org.pages_reserved == 0


def test_an_upload_is_accepted_while_redis_is_down_and_delivered_later(api, settings):
    test_redis = settings.REDIS_URL
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/15"  # nothing listens there
    run = accepted_run(api, make_pdf(1))

    settings.REDIS_URL = test_redis
    age(run)
    assert sweep_once().redelivered == 1
    assert waiting_job_ids(FIRST) == [stage_job_id(run_id=run.id, stage=FIRST, attempt=0)]


def test_uploads_are_answered_at_once_while_redis_is_silent_and_delivered_later(
    api, settings, silent_redis
):
    started = time.monotonic()
    runs = [accepted_run(api, make_pdf(1)) for _ in range(3)]
    # One short timeout, then the breaker leaves Redis alone: not ten seconds an upload.
    assert time.monotonic() - started < 1.0

    settings.REDIS_URL = silent_redis
    for run in runs:
        age(run)
    assert sweep_once().redelivered == 3
    assert drive(runs[0].id).status == "succeeded"


def test_a_retry_left_scheduled_long_after_its_time_is_delivered_now(api, settings):
    settings.PAPERLANE_REDELIVER_AFTER_SECONDS = 10
    run = upload(api)
    redis_connection().flushdb()
    past = timezone.now() - timedelta(seconds=30)
    ImportRun.objects.filter(id=run.id).update(due_at=past, status="processing")
    job_id = stage_job_id(run_id=run.id, stage=FIRST, attempt=0)
    get_queue(queue_for(FIRST, "interactive", 0)).enqueue_at(
        past, "pipeline.engine.execute_stage", str(run.id), FIRST, job_id=job_id
    )
    age(run)

    assert sweep_once().redelivered == 1
    assert waiting_job_ids(FIRST) == [job_id]


def test_it_redelivers_a_job_marked_queued_that_is_in_no_queue(api):
    run = upload(api)
    job_id = first_job_id(run)
    assert redis_connection().lrem(lane_of(job_id).key, 0, job_id) == 1
    age(run)
    enqueued_long_ago(job_id)

    assert sweep_once().redelivered == 1
    assert waiting_job_ids(FIRST) == [job_id]
    assert Job.fetch(job_id, connection=redis_connection()).get_status() == "queued"


def test_a_job_taken_off_its_lane_by_a_worker_that_died_is_redelivered_within_seconds(
    api, monkeypatch
):
    monkeypatch.setattr("pipeline.dispatch.STRANDED_AFTER_SECONDS", 10)
    run = upload(api)
    job_id = first_job_id(run)
    # A worker popped it (BLPOP over its lanes) and was killed before starting it.
    assert redis_connection().lrem(lane_of(job_id).key, 0, job_id) == 1
    age(run)

    enqueued_long_ago(job_id, seconds=5)
    assert sweep_once().redelivered == 0  # a worker may be starting it this instant
    enqueued_long_ago(job_id, seconds=15)
    assert sweep_once().redelivered == 1  # not a minute (the started-job rule) later
    assert waiting_job_ids(FIRST) == [job_id]


def test_it_redelivers_a_job_left_in_a_queue_no_worker_reads_to_a_lane(api, settings):
    run = upload(api)
    job_id = first_job_id(run)
    redis_connection().flushdb()
    # Queued before the stage had lanes, in the queue named after it.
    get_queue(FIRST).enqueue("pipeline.engine.execute_stage", str(run.id), FIRST, job_id=job_id)
    age(run)
    enqueued_long_ago(job_id)

    assert sweep_once().redelivered == 1
    assert waiting_job_ids(FIRST) == [job_id] and get_queue(FIRST).count == 0

    # In a lane that a lowered PAPERLANE_LANES took away.
    redis_connection().flushdb()
    lane_5 = get_queue(queue_for(FIRST, "interactive", 5))
    lane_5.enqueue("pipeline.engine.execute_stage", str(run.id), FIRST, job_id=job_id)
    settings.PAPERLANE_LANES = 2
    age(run)
    enqueued_long_ago(job_id)

    assert sweep_once().redelivered == 1
    assert waiting_job_ids(FIRST) == [job_id] and lane_5.count == 0


def test_it_leaves_a_queued_job_that_a_worker_is_taking_off_its_queue(api):
    run = upload(api)
    queue = lane_of(first_job_id(run))
    # What a worker's dequeue does before it marks the job started.
    redis_connection().lmove(queue.key, queue.intermediate_queue_key)
    age(run)
    enqueued_long_ago(first_job_id(run))

    assert sweep_once().redelivered == 0
    assert queue.job_ids == []


def test_a_job_left_half_taken_by_a_dead_worker_is_redelivered_by_a_later_pass(api, settings):
    settings.PAPERLANE_SWEEP_INTERVAL_SECONDS = 1
    run = upload(api)
    job_id = first_job_id(run)
    queue = lane_of(job_id)
    # The worker took it off its queue, then its host died before it marked it started.
    redis_connection().lmove(queue.key, queue.intermediate_queue_key)
    age(run)
    enqueued_long_ago(job_id)

    assert sweep_once().redelivered == 0  # first seen: a live worker may be taking it
    # A sweep interval must pass on the clock: RQ stamps when a pass first saw it.
    time.sleep(1.1)
    assert sweep_once().redelivered == 1
    assert lane_of(job_id).job_ids == [job_id]
    # Out of RQ's list too, so RQ's own clean-up cannot fail the job delivered again.
    assert redis_connection().lrange(queue.intermediate_queue_key, 0, -1) == []
    assert drive(run.id).status == "succeeded"


def test_a_pass_bounded_to_two_runs_redelivers_the_two_oldest(api, monkeypatch):
    monkeypatch.setattr("pipeline.sweeper.DELIVERIES_CHECKED_PER_PASS", 2)
    runs = [upload(api) for _ in range(5)]
    redis_connection().flushdb()
    # Ages out of upload order, so the order rows happen to come back in cannot pass.
    for run, seconds in zip(runs, [30, 50, 10, 40, 20], strict=True):
        age(run, seconds=seconds)

    assert sweep_once().redelivered == 2
    assert sorted(waiting_job_ids(FIRST)) == sorted([first_job_id(runs[1]), first_job_id(runs[3])])


def test_an_old_file_no_document_points_to_is_removed_by_an_orphan_pass_only(org):
    key = store(key_without_document(org), written_ago=2 * HOURS)

    assert sweep_once().orphans_removed == 0
    assert storage_exists(key=key)
    assert sweep_once(housekeeping=True).orphans_removed == 1
    assert not storage_exists(key=key)


def test_a_file_no_document_points_to_yet_is_kept_during_the_grace_period(org):
    key = store(key_without_document(org), written_ago=50 * 60)

    assert sweep_once(housekeeping=True).orphans_removed == 0
    assert storage_exists(key=key)


def test_the_file_of_an_existing_document_is_kept_however_old(api):
    key = upload(api).document.storage_key
    backdate(key, seconds=30 * 24 * HOURS)

    assert sweep_once(housekeeping=True).orphans_removed == 0
    assert storage_exists(key=key)


def test_an_old_file_of_another_version_of_an_existing_document_is_kept(api, org):
    document = upload(api).document
    other_version = key_without_document(org, version=2, document_id=document.id)
    store(other_version, written_ago=2 * HOURS)

    assert sweep_once(housekeeping=True).orphans_removed == 0
    assert storage_exists(key=other_version)


def test_old_stray_files_whose_keys_do_not_parse_are_kept(org):
    document_id = uuid.uuid4()
    folder = f"orgs/{org.id}/documents/{document_id}"
    strays = [
        f"{folder}/v1/original.pdf.bak",
        f"{folder}/v1/notes.txt",
        f"{folder}/v01/original.pdf",
        f"orgs/{org.id}/documents/{document_id.hex}/v1/original.pdf",
        f"orgs/{org.id}/readme.txt",
    ]
    for key in strays:
        store(key, written_ago=2 * HOURS)

    assert sweep_once(housekeeping=True).orphans_removed == 0
    assert [key for key in strays if not storage_exists(key=key)] == []


def test_an_orphan_pass_removes_at_most_its_limit(org, monkeypatch):
    monkeypatch.setattr("pipeline.sweeper.ORPHANS_PER_PASS", 2)
    keys = [store(key_without_document(org), written_ago=2 * HOURS) for _ in range(3)]

    assert sweep_once(housekeeping=True).orphans_removed == 2
    assert sum(storage_exists(key=key) for key in keys) == 1
    assert sweep_once(housekeeping=True).orphans_removed == 1


def test_the_orphan_walk_goes_on_where_the_last_pass_stopped_and_starts_over_at_the_end(
    org, monkeypatch
):
    monkeypatch.setattr("pipeline.sweeper.ORPHAN_KEYS_PER_PASS", 2)
    ids = sorted(uuid.uuid4() for _ in range(5))
    keys = [store(key_without_document(org, document_id=i), written_ago=2 * HOURS) for i in ids]
    Document.objects.create(  # the second key has its document: looked at, kept
        id=ids[1], organisation=org, filename="kept.pdf", kind="pdf", size_bytes=1,
        sha256="0" * 64, storage_key=keys[1],
    )  # fmt: skip

    passes = [sweep_once(housekeeping=True).orphans_removed for _ in range(3)]

    assert passes == [1, 2, 1]  # keys 0-1, 2-3, then 4 and the end of the storage
    assert [storage_exists(key=key) for key in keys] == [False, True, False, False, False]
    assert redis_connection().get(ORPHANS_RESUME_KEY) == b""
    # A new orphan that sorts before where the walk was is found once it starts over.
    early = store(key_without_document(org, document_id=uuid.UUID(int=0)), written_ago=2 * HOURS)
    assert sweep_once(housekeeping=True).orphans_removed == 1
    assert not storage_exists(key=early)


def test_an_orphan_the_storage_will_not_delete_is_logged_and_the_walk_goes_on(
    org, monkeypatch, caplog
):
    keys = sorted(store(key_without_document(org), written_ago=2 * HOURS) for _ in range(3))

    def delete(*, key: str) -> None:
        if key == keys[0]:
            raise PermissionError("object locked")
        storage_delete(key=key)

    monkeypatch.setattr("documents.services.orphans.storage_delete", delete)

    assert sweep_once(housekeeping=True).orphans_removed == 2
    assert [storage_exists(key=key) for key in keys] == [True, False, False]
    assert f"could not delete the orphaned file {keys[0]}" in caplog.text


def test_with_a_sweeper_on_every_host_one_does_the_housekeeping_each_interval(org):
    store(key_without_document(org), written_ago=2 * HOURS)
    assert sweep_once(housekeeping=True, one_of_many=True).orphans_removed == 1
    key = store(key_without_document(org), written_ago=2 * HOURS)

    assert sweep_once(housekeeping=True, one_of_many=True).orphans_removed == 0
    assert storage_exists(key=key)
    redis_connection().delete(HOUSEKEEPING_LOCK_KEY)  # the interval has passed
    assert sweep_once(housekeeping=True, one_of_many=True).orphans_removed == 1


def test_the_sweep_command_without_loop_includes_the_orphan_pass(org):
    key = store(key_without_document(org), written_ago=2 * HOURS)
    out = io.StringIO()

    call_command("sweep", stdout=out)

    assert "orphans removed 1" in out.getvalue()
    assert not storage_exists(key=key)


def test_a_job_missing_from_its_queue_is_left_until_the_redeliver_period_passes(api):
    run = upload(api)
    redis_connection().lrem(lane_of(first_job_id(run)).key, 0, first_job_id(run))
    age(run)

    assert sweep_once().redelivered == 0


def test_a_pass_bounded_to_one_repair_abandons_the_lease_that_expired_first(api, monkeypatch):
    monkeypatch.setattr("pipeline.sweeper.REPAIRS_PER_PASS", 1)
    runs = [upload(api) for _ in range(3)]
    for n, (run, seconds) in enumerate(zip(runs, [10, 30, 20], strict=True)):
        run_claim(run_id=run.id, stage=FIRST, job_id=f"job-{n}", worker=WORKER)
        ImportRun.objects.filter(id=run.id).update(
            lease_expires_at=timezone.now() - timedelta(seconds=seconds)
        )

    assert sweep_once().abandoned == 1
    crashed = ImportRun.objects.filter(crashes=1).values_list("id", flat=True)
    assert list(crashed) == [runs[1].id]


def test_a_pass_bounded_to_one_repair_releases_the_run_that_ended_first(api, monkeypatch):
    monkeypatch.setattr("pipeline.sweeper.REPAIRS_PER_PASS", 1)
    runs = [upload(api) for _ in range(3)]
    for run, seconds in zip(runs, [10, 30, 20], strict=True):
        ImportRun.objects.filter(id=run.id).update(status="failed")
        age(run, seconds=seconds)

    assert sweep_once().released == 1
    released = QuotaReservation.objects.filter(status="released").values_list("run", flat=True)
    assert list(released) == [runs[1].id]


def test_the_marker_tells_once_that_redis_lost_its_data():
    redis_connection().delete(MARKER_KEY)

    assert redis_lost_data() is True  # a new Redis, as far as the sweeper knows
    assert redis_lost_data() is False
    redis_connection().flushdb()
    assert redis_lost_data() is True
    assert redis_lost_data() is False


@pytest.mark.slow
def test_the_sweep_loop_redelivers_at_once_after_redis_lost_its_data(api):
    run = upload(api)
    job_id = first_job_id(run)
    # Passes a minute apart: only the loss of data can bring the job back within seconds.
    sweeper = subprocess.Popen(
        [sys.executable, "manage.py", "sweep", "--loop"],
        cwd=ROOT,
        env=process_env(PAPERLANE_SWEEP_INTERVAL_SECONDS="60"),
        start_new_session=True,
    )
    try:
        # A pass ends with the minute's lag sample: the first pass is over once it is there.
        wait_for(lambda: redis_connection().exists(LAG_KEY), timeout=30, what="a first pass")
        # It has looked for lost jobs: only a pass after the flush can bring the job back.
        assert redis_connection().exists(CHECK_LOCK_KEY)
        age(run)
        redis_connection().flushdb()
        flushed = time.monotonic()

        wait_for(lambda: waiting_job_ids(FIRST) == [job_id], timeout=10, what="the redelivery")
        assert time.monotonic() - flushed < 5
    finally:
        stop_group(sweeper, grace=10)


def _syncs(connection, count: int, *, days_ago: float, finished: bool = True) -> None:
    started = timezone.now() - timedelta(days=days_ago)
    ConnectionSync.objects.bulk_create(
        ConnectionSync(
            connection=connection,
            started_at=started + timedelta(seconds=n),
            finished_at=started + timedelta(seconds=n + 1) if finished else None,
            result="ok" if finished else "",
        )
        for n in range(count)
    )


def _local_connection(org, folder):
    folder.mkdir()
    return connection_create_local(organisation=org, path=str(folder))


def pruned(report) -> int:
    """The syncs the connectors' housekeeping (registered with the sweeper) deleted."""
    return report.housekeeping.get("syncs pruned", 0)


def test_the_housekeeping_prunes_old_syncs_but_keeps_each_connections_newest(
    org, tmp_path, monkeypatch
):
    monkeypatch.setattr("connectors.services.SYNC_HISTORY_DAYS", 30)
    busy = _local_connection(org, tmp_path / "busy")
    quiet = _local_connection(org, tmp_path / "quiet")
    _syncs(busy, 1, days_ago=50, finished=False)  # a sync that never ended: kept
    _syncs(busy, 40, days_ago=45)
    _syncs(busy, 5, days_ago=1)
    _syncs(quiet, 3, days_ago=100)  # an idle connection keeps its last syncs

    assert pruned(sweep_once()) == 0
    # The 5 recent ones and the 15 newest old ones stay.
    assert pruned(sweep_once(housekeeping=True)) == 40 - (SYNCS_ALWAYS_KEPT - 5)

    kept = ConnectionSync.objects.filter(connection=busy)
    assert kept.count() == SYNCS_ALWAYS_KEPT + 1
    newest = set(kept.order_by("-started_at")[:SYNCS_ALWAYS_KEPT])
    assert set(kept) - newest == set(kept.filter(finished_at__isnull=True))
    assert ConnectionSync.objects.filter(connection=quiet).count() == 3
    assert pruned(sweep_once(housekeeping=True)) == 0


def test_one_housekeeping_pass_prunes_a_bounded_number_of_syncs_oldest_first(
    org, tmp_path, monkeypatch
):
    monkeypatch.setattr("connectors.services.SYNCS_PER_PASS", 7)
    connection = _local_connection(org, tmp_path / "folder")
    _syncs(connection, 50, days_ago=60)
    oldest = list(
        ConnectionSync.objects.filter(connection=connection)
        .order_by("started_at")
        .values_list("id", flat=True)[:7]
    )

    assert pruned(sweep_once(housekeeping=True)) == 7
    assert not ConnectionSync.objects.filter(id__in=oldest).exists()


def test_of_many_sweepers_one_asks_redis_about_lost_jobs_each_interval(api, settings):
    settings.PAPERLANE_SWEEP_INTERVAL_SECONDS = 0.5
    first, second = accepted_run(api, make_pdf(1)), accepted_run(api, make_pdf(1))
    redis_connection().flushdb()
    age(first, seconds=30)

    assert sweep_once(one_of_many=True).redelivered == 1
    age(second, seconds=30)
    # Another host's sweeper within the same interval leaves the check to the first.
    assert sweep_once(one_of_many=True).redelivered == 0
    assert sweep_once().redelivered == 1  # a pass of its own (`sweep`) always checks

    redis_connection().flushdb()  # both jobs lost again, and the check's lock with them
    assert sweep_once(one_of_many=True).redelivered == 2
    # The check is held for most of an interval (0.4 s of 0.5 s), then any sweeper's.
    assert 0 < redis_connection().pttl(CHECK_LOCK_KEY) <= 400
    wait_for(lambda: not redis_connection().exists(CHECK_LOCK_KEY), timeout=2, what="the hold")
