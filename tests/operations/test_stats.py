"""The operators' selectors (operations/stats) against a known set of runs, attempts and real
RQ queues in the test Redis database."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from rq.registry import StartedJobRegistry
from rq.worker import SimpleWorker

from core.redis import redis_connection
from documents.services.organisations import organisation_create
from operations.stats.history import throughput_by_minute
from operations.stats.snapshot import pipeline_snapshot
from operations.stats.totals import ROLLUP_KEY, attempt_totals
from pipeline.broker import get_queue
from pipeline.dispatch import stage_enqueue, stage_job_id
from pipeline.lag import lag_history, lag_sample_record, stage_lags
from pipeline.models import ImportRun, StageAttempt
from pipeline.queues import queue_for, stage_queue_names
from tests.support.files import make_pdf
from tests.support.runs import unchecked_run

pytestmark = pytest.mark.django_db

Outcome = StageAttempt.Outcome


def lanes(stage: str) -> list:
    return [get_queue(name) for name in stage_queue_names(stage)]


def make_run(org, **fields) -> ImportRun:
    """A run of a 1-page PDF whose fields are then set exactly (updated_at included)."""
    run = unchecked_run(org, make_pdf(1), kind="pdf", pages=1)
    ImportRun.objects.filter(id=run.id).update(**fields)
    run.refresh_from_db()
    return run


def attempt(run, stage, *, number=1, outcome=Outcome.SUCCEEDED, finished_ago, seconds, **extra):
    finished = timezone.now() - timedelta(seconds=finished_ago)
    return StageAttempt.objects.create(
        run=run,
        stage=stage,
        number=number,
        outcome=outcome,
        started_at=finished - timedelta(seconds=seconds),
        finished_at=finished,
        **extra,
    )


@pytest.fixture
def known_runs(org, settings):
    """Runs in every state the dashboard counts, each in a known stage."""
    settings.PAPERLANE_STUCK_AFTER_SECONDS = 900
    now = timezone.now()
    ago = lambda seconds: now - timedelta(seconds=seconds)  # noqa: E731
    return {
        "due_create": make_run(org, status="queued", stage="create", due_at=ago(30)),
        "old_create": make_run(
            org, status="queued", stage="create", due_at=ago(1200), updated_at=ago(1200)
        ),
        "running_extract": make_run(
            org,
            status="processing",
            stage="extract",
            due_at=ago(5),
            lease_owner="job@worker",
            lease_expires_at=ago(-20),
        ),
        "retry_embed": make_run(org, status="processing", stage="embed", due_at=ago(-60)),
        "expired_store": make_run(
            org,
            status="processing",
            stage="store",
            due_at=ago(50),
            lease_owner="job@dead-worker",
            lease_expires_at=ago(10),
        ),
        "failed_extract": make_run(org, status="failed", stage="extract", finished_at=ago(600)),
        "dead_embed_old": make_run(org, status="dead_letter", stage="embed", finished_at=ago(7200)),
        "dead_embed": make_run(org, status="dead_letter", stage="embed", finished_at=ago(60)),
        "done": make_run(org, status="succeeded", stage="settle", finished_at=ago(100)),
    }


def test_it_counts_runs_per_stage_from_the_database(known_runs):
    snapshot = pipeline_snapshot()
    create, store, extract, ocr, embed, settle = snapshot.stages

    assert (create.due, create.running, create.retry_scheduled, create.stuck) == (2, 0, 0, 1)
    assert 1199 < create.lag_seconds < 1230  # the oldest due run, not the newest
    assert (store.due, store.running, store.stuck) == (0, 0, 1)  # an expired lease is stuck
    assert store.lag_seconds is None
    assert (extract.due, extract.running, extract.failed_last_hour) == (0, 1, 1)
    assert (embed.due, embed.retry_scheduled, embed.dead_lettered_last_hour) == (0, 1, 1)
    assert (settle.due, settle.running, settle.failed_last_hour) == (0, 0, 0)
    assert snapshot.stuck_total == 2
    assert {run.id for run in snapshot.stuck_runs} == {
        str(known_runs["old_create"].id),
        str(known_runs["expired_store"].id),
    }
    reasons = {run.stage: run.reason for run in snapshot.stuck_runs}
    assert reasons["store"].startswith("its worker's lease expired")
    assert reasons["create"].startswith("no progress for 20 min")
    assert stage_lags()["create"] == pytest.approx(create.lag_seconds, abs=2)


def test_it_counts_attempts_rates_and_durations_per_stage(org):
    run, other = make_run(org, status="succeeded"), make_run(org, status="succeeded")
    for number, seconds in enumerate((1, 2, 3), start=1):
        attempt(run, "extract", number=number, finished_ago=60, seconds=seconds)
    attempt(run, "extract", number=4, outcome=Outcome.ABANDONED, finished_ago=180, seconds=30)
    attempt(
        run,
        "extract",
        number=5,
        outcome=Outcome.TRANSIENT_ERROR,
        finished_ago=600,
        seconds=4,
        error_code="transient_error",
    )
    attempt(run, "extract", number=6, finished_ago=1800, seconds=10)
    attempt(run, "extract", number=7, finished_ago=7200, seconds=100)  # over an hour ago
    attempt(other, "embed", outcome=Outcome.PERMANENT_ERROR, finished_ago=30, seconds=1)
    StageAttempt.objects.create(  # still running: counted nowhere
        run=other, stage="settle", number=1, started_at=timezone.now()
    )

    extract = pipeline_snapshot().stage("extract")
    embed = pipeline_snapshot().stage("embed")

    assert (extract.done_5m, extract.failed_5m) == (3, 1)
    assert (extract.done_15m, extract.failed_15m) == (3, 2)
    assert (extract.done_60m, extract.failed_60m) == (4, 2)
    assert extract.failure_share_15m == pytest.approx(2 / 5)
    # Durations of the hour's attempts that ran to an outcome: 1, 2, 3, 4 and 10 s.
    assert extract.p50_seconds == pytest.approx(3)
    assert extract.p95_seconds == pytest.approx(4 + 0.8 * 6)
    assert (embed.done_5m, embed.failed_5m, embed.failure_share_15m) == (0, 1, 1.0)
    assert pipeline_snapshot().stage("settle").done_60m == 0


def test_it_reads_queues_registries_and_workers_from_redis(org, redis_conn):
    due = make_run(org, status="queued", stage="create", due_at=timezone.now())
    held = make_run(org, status="processing", stage="extract", due_at=timezone.now())
    later = make_run(org, status="processing", stage="embed")
    assert stage_enqueue(run_id=due.id, stage="create", attempt=0)
    assert stage_enqueue(run_id=held.id, stage="create", attempt=0)
    head = stage_job_id(run_id=due.id, stage="create", attempt=0)
    stamp = (timezone.now() - timedelta(seconds=45)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    redis_conn.hset(f"rq:job:{head}", "enqueued_at", stamp)
    at = timezone.now() + timedelta(minutes=5)
    assert stage_enqueue(run_id=later.id, stage="embed", attempt=1, at=at)
    # A job a worker is running (RQ scores it by when its hold expires), one expired long ago.
    started = StartedJobRegistry.key_template.format(queue_for("extract", "interactive", 5))
    running_job = stage_job_id(run_id=held.id, stage="extract", attempt=0)
    now_ts = timezone.now().timestamp()
    redis_conn.zadd(started, {f"{running_job}:exec-1": now_ts + 60, "gone:exec-0": now_ts - 60})
    StageAttempt.objects.create(
        run=held, stage="extract", number=1, job_id=running_job, started_at=timezone.now()
    )
    worker = SimpleWorker(lanes("extract"), connection=redis_connection(), name="w-extract")
    worker.register_birth()
    worker.set_state("busy")
    worker.set_current_job_id(running_job)
    idle = SimpleWorker(
        lanes("create") + lanes("store"), connection=redis_connection(), name="w-idle"
    )
    idle.register_birth()

    snapshot = pipeline_snapshot()
    create, store, extract, ocr, embed, settle = snapshot.stages

    assert snapshot.redis_ok and snapshot.suspended is False
    assert (create.waiting, create.started_jobs, create.scheduled_jobs) == (2, 0, 0)
    assert 44 < create.queue_lag_seconds < 60
    assert (extract.waiting, extract.started_jobs) == (0, 1)
    assert (embed.waiting, embed.scheduled_jobs) == (0, 1)
    assert [s.workers for s in snapshot.stages] == [1, 1, 1, 0, 0, 0]
    busy = next(w for w in snapshot.workers if w.name == "w-extract")
    assert (busy.state, busy.run_id, busy.stage, busy.attempt) == (
        "busy",
        str(held.id),
        "extract",
        1,
    )
    assert busy.stages == ("extract",) and busy.last_heartbeat is not None
    assert busy.serves == "extract, interactive first"
    spare = next(w for w in snapshot.workers if w.name == "w-idle")
    assert (spare.stages, spare.job_id, spare.run_id) == (("create", "store"), None, None)
    assert settle.waiting == 0


def test_without_redis_it_still_answers_from_the_database(org, settings):
    from tests.support.processes import free_port

    make_run(org, status="queued", stage="create", due_at=timezone.now())
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/15"  # nothing listens there

    snapshot = pipeline_snapshot()

    assert not snapshot.redis_ok and snapshot.workers is None
    assert snapshot.stage("create").due == 1
    assert snapshot.stage("create").waiting is None


def test_it_reports_each_organisations_pages_those_holding_most_first(org, other_org):
    zeta = organisation_create(slug="zeta", page_limit=10, name="Zeta")
    make_run(zeta, status="queued")  # holds one page

    snapshot = pipeline_snapshot(organisations_limit=2)
    everyone = pipeline_snapshot().organisations

    assert [o.slug for o in snapshot.organisations] == ["zeta", "acme"]
    assert snapshot.organisations_total == 3
    first = snapshot.organisations[0]
    assert (first.page_limit, first.pages_used, first.pages_reserved) == (10, 0, 1)
    assert first.pages_available == 9
    assert {o.slug for o in everyone} == {"acme", "globex", "zeta"}


def test_totals_count_every_attempt_once_whether_rolled_up_or_not(org, redis_conn):
    run = make_run(org, status="succeeded")
    attempt(run, "extract", number=1, finished_ago=3 * 3600, seconds=2)
    attempt(run, "extract", number=2, finished_ago=2 * 3600, seconds=0.2)
    attempt(
        run,
        "extract",
        number=3,
        outcome=Outcome.TIMEOUT,
        finished_ago=60,
        seconds=300,
        error_code="timeout",
    )
    attempt(run, "embed", finished_ago=30, seconds=700)

    first = attempt_totals()
    rolled_up = redis_conn.get(ROLLUP_KEY)
    again = attempt_totals()
    redis_conn.delete(ROLLUP_KEY)
    recounted = attempt_totals()

    assert rolled_up is not None  # the two old attempts are now counted in Redis
    for totals in (first, again, recounted):
        assert totals.attempts == {
            ("extract", "succeeded", ""): 2,
            ("extract", "timeout", "timeout"): 1,
            ("embed", "succeeded", ""): 1,
        }
        assert totals.retries == {"extract": 2, "embed": 0}
        extract = totals.durations["extract"]
        assert (extract.count, extract.sum_seconds) == (3, pytest.approx(302.2))
        # Buckets: 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800 (cumulative).
        assert extract.buckets == [0, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 3]
        assert totals.durations["embed"].buckets[-2:] == [0, 1]


def test_totals_only_go_up_as_the_rollup_moves_on(org, redis_conn):
    run = make_run(org, status="succeeded")
    attempt(run, "store", number=1, finished_ago=50 * 60, seconds=1)
    attempt(run, "store", number=2, finished_ago=5 * 60, seconds=1)
    now = timezone.now()

    before = attempt_totals(now=now)
    # Half an hour later the first attempt is past the rollup's horizon: moved into
    # Redis, not counted twice; a new attempt has finished meanwhile.
    attempt(run, "store", number=3, finished_ago=0, seconds=1)
    later = attempt_totals(now=now + timedelta(minutes=30))
    latest = attempt_totals(now=now + timedelta(minutes=90))

    assert before.attempts[("store", "succeeded", "")] == 2
    assert later.attempts[("store", "succeeded", "")] == 3
    assert latest.attempts[("store", "succeeded", "")] == 3
    assert latest.durations["store"].count == 3


def test_throughput_is_counted_per_minute_for_the_last_hour(org):
    run = make_run(org, status="succeeded")
    now = timezone.now().replace(second=30)
    for number, (minutes_ago, outcome) in enumerate(
        [
            (0, Outcome.SUCCEEDED),
            (0, Outcome.TIMEOUT),
            (2, Outcome.SUCCEEDED),
            (61, Outcome.SUCCEEDED),
        ],
        start=1,
    ):
        finished = now - timedelta(minutes=minutes_ago)
        StageAttempt.objects.create(
            run=run,
            stage="create",
            number=number,
            outcome=outcome,
            started_at=finished,
            finished_at=finished,
        )

    minutes = throughput_by_minute(now=now)

    assert len(minutes) == 60
    assert minutes[-1].start == now.replace(second=0, microsecond=0)
    assert (minutes[-1].done, minutes[-1].failed) == (1, 1)
    assert (minutes[-3].done, minutes[-3].failed) == (1, 0)
    assert sum(m.done + m.failed for m in minutes) == 3  # 61 minutes ago is out


def test_lag_is_sampled_once_a_minute(redis_conn):
    now = timezone.now().replace(second=10)
    reads = []

    def read(value):
        def lags():
            reads.append(value)
            return {"create": value, "embed": None}

        return lags

    assert lag_sample_record(read_lags=read(12.5), now=now)
    assert not lag_sample_record(read_lags=read(99.0), now=now + timedelta(seconds=30))
    assert lag_sample_record(read_lags=read(40.0), now=now + timedelta(minutes=1))

    history = lag_history(now=now + timedelta(minutes=1))

    assert reads == [12.5, 40.0]  # the second caller of a minute does not even read
    assert [s.lags["create"] for s in history] == [12.5, 40.0]
    assert history[0].lags["embed"] is None and history[0].lags["settle"] is None
    assert history[1].minute - history[0].minute == timedelta(minutes=1)
    assert redis_conn.ttl("paperlane:stats:lag") > 0


def test_a_lag_sample_lost_to_redis_is_skipped_quietly(settings):
    from tests.support.processes import free_port

    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/15"

    assert not lag_sample_record(read_lags=lambda: {"create": 1.0})
    assert lag_history() == []


def test_uuid_job_ids_of_other_shapes_are_not_mistaken_for_runs(org, redis_conn):
    worker = SimpleWorker([get_queue("create")], connection=redis_connection(), name="w-other")
    worker.register_birth()
    worker.set_current_job_id(f"cleanup-{uuid.uuid4()}")

    [seen] = pipeline_snapshot().workers

    assert seen.job_id.startswith("cleanup-") and seen.run_id is None
