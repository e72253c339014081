"""Each stage now: its queue in Redis, its runs and recent attempts in the database.

`pipeline_snapshot()` answers with two SQL aggregates (runs, attempts) plus a
few small bounded reads (the oldest stuck runs, the busy workers' attempts,
organisations), and two pipelined Redis round trips for every queue, registry
and worker at once (`rq_state`). If Redis does not answer, the database half is
still returned and `redis_ok` is False.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, DurationField, Min, Q
from django.utils import timezone
from redis.exceptions import RedisError

from core.redis import stats_connection
from documents.models import Organisation
from documents.services.quota import QuotaSnapshot
from operations.stats.base import FAILED_OUTCOMES, TIMED_OUTCOMES, PercentileCont, attempt_duration
from operations.stats.rq_state import RedisState, WorkerState, read_redis_state, workers_from
from pipeline.lag import age_seconds, due_now_q
from pipeline.models import ACTIVE_STATUSES, ImportRun, RunStatus, StageAttempt
from pipeline.queues import PRIORITIES
from pipeline.stage_list import STAGES

Outcome = StageAttempt.Outcome

# How many stuck runs the snapshot lists (it counts them all).
STUCK_LISTED = 20


@dataclass(frozen=True)
class PriorityQueueStats:
    """One priority's lanes of a stage in Redis: jobs waiting, the age of the oldest head."""

    priority: str
    waiting: int
    queue_lag_seconds: float | None


@dataclass(frozen=True)
class StageStats:
    """One stage now. Redis numbers are None when Redis did not answer."""

    name: str
    # Redis (RQ), summed over the stage's lanes: jobs waiting, being worked on,
    # scheduled for later; the age of the oldest job at the head of a lane; workers
    # that serve the stage.
    waiting: int | None
    started_jobs: int | None
    scheduled_jobs: int | None
    queue_lag_seconds: float | None
    workers: int | None
    # Database: runs due now with no worker, held by a live lease, due later (a
    # retry waiting out its backoff), stuck; lag is the age of the oldest due run.
    due: int
    running: int
    retry_scheduled: int
    stuck: int
    lag_seconds: float | None
    failed_last_hour: int
    dead_lettered_last_hour: int
    # Attempts that finished in the last 5, 15 and 60 minutes, and durations over the hour.
    done_5m: int
    failed_5m: int
    done_15m: int
    failed_15m: int
    done_60m: int
    failed_60m: int
    p50_seconds: float | None
    p95_seconds: float | None
    # Redis: the stage's interactive and bulk lanes apart (None when Redis did not answer).
    priorities: tuple[PriorityQueueStats, ...] | None = None
    # Seconds the stage's workers still take none of its jobs, its provider failing
    # (core/provider_breaker.py); 0 once that pause is over but no call has succeeded yet; None
    # when its provider is well (or Redis did not answer).
    paused_seconds: float | None = None

    @property
    def done_per_minute_5m(self) -> float:
        return self.done_5m / 5

    @property
    def failed_per_minute_5m(self) -> float:
        return self.failed_5m / 5

    @property
    def done_per_minute_60m(self) -> float:
        return self.done_60m / 60

    @property
    def failed_per_minute_60m(self) -> float:
        return self.failed_60m / 60

    @property
    def failure_share_15m(self) -> float | None:
        """Failed attempts among those that finished in the last 15 minutes."""
        finished = self.done_15m + self.failed_15m
        return self.failed_15m / finished if finished else None


@dataclass(frozen=True)
class StuckRun:
    id: str
    organisation: str
    status: str
    stage: str
    updated_at: datetime
    lease_expires_at: datetime | None
    reason: str


@dataclass(frozen=True)
class OrganisationPages(QuotaSnapshot):
    slug: str
    name: str


@dataclass(frozen=True)
class PipelineSnapshot:
    taken_at: datetime
    stages: tuple[StageStats, ...]
    # None when Redis did not answer.
    workers: tuple[WorkerState, ...] | None
    suspended: bool | None
    redis_ok: bool
    stuck_total: int
    stuck_runs: tuple[StuckRun, ...]
    organisations: tuple[OrganisationPages, ...]
    organisations_total: int

    def stage(self, name: str) -> StageStats:
        return next(s for s in self.stages if s.name == name)


def no_progress_q(now: datetime) -> Q:
    """No change or progress report for PAPERLANE_STUCK_AFTER_SECONDS (`updated_at` moves
    with each, not with lease renewals)."""
    return Q(updated_at__lt=now - timedelta(seconds=settings.PAPERLANE_STUCK_AFTER_SECONDS))


def lease_expired_q(now: datetime) -> Q:
    """A worker's lease that expired: the sweeper has not taken the stage back yet."""
    return ~Q(lease_owner="") & Q(lease_expires_at__lt=now)


def stuck_runs_q(now: datetime) -> Q:
    """Runs that have not ended and made no progress, or whose worker's lease expired."""
    return Q(status__in=ACTIVE_STATUSES) & (no_progress_q(now) | lease_expired_q(now))


def _run_counts(now: datetime) -> dict[str, dict]:
    since = now - timedelta(hours=1)
    active, unleased = Q(status__in=ACTIVE_STATUSES), Q(lease_owner="")
    due_now = due_now_q(now)
    ended_recently = Q(status__in=(RunStatus.FAILED, RunStatus.DEAD_LETTER), finished_at__gte=since)
    rows = (
        ImportRun.objects.filter(active | ended_recently)
        .values("stage")
        .order_by()
        .annotate(
            due=Count("id", filter=due_now),
            oldest_due_at=Min("due_at", filter=due_now),
            running=Count("id", filter=active & ~unleased & Q(lease_expires_at__gte=now)),
            retry_scheduled=Count("id", filter=active & unleased & Q(due_at__gt=now)),
            stuck=Count("id", filter=stuck_runs_q(now)),
            failed=Count("id", filter=ended_recently & Q(status=RunStatus.FAILED)),
            dead=Count("id", filter=ended_recently & Q(status=RunStatus.DEAD_LETTER)),
        )
    )
    return {row.pop("stage"): row for row in rows}


def _attempt_counts(now: datetime) -> dict[str, dict]:
    done, failed = Q(outcome=Outcome.SUCCEEDED), Q(outcome__in=FAILED_OUTCOMES)
    windows = {minutes: Q(finished_at__gte=now - timedelta(minutes=minutes)) for minutes in (5, 15)}
    aggregates = {
        "done_5m": Count("id", filter=done & windows[5]),
        "failed_5m": Count("id", filter=failed & windows[5]),
        "done_15m": Count("id", filter=done & windows[15]),
        "failed_15m": Count("id", filter=failed & windows[15]),
        "done_60m": Count("id", filter=done),
        "failed_60m": Count("id", filter=failed),
    }
    timed = Q(outcome__in=TIMED_OUTCOMES)
    for name, fraction in (("p50", 0.5), ("p95", 0.95)):
        aggregates[name] = PercentileCont(
            attempt_duration(), fraction, filter=timed, output_field=DurationField()
        )
    last_hour = StageAttempt.objects.filter(finished_at__gte=now - timedelta(hours=1))
    rows = {
        row.pop("stage"): row for row in last_hour.values("stage").order_by().annotate(**aggregates)
    }
    for row in rows.values():
        row["p50"], row["p95"] = _seconds(row["p50"]), _seconds(row["p95"])
    return rows


def _seconds(value) -> float | None:
    if value is None:
        return None
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def _stuck_runs(now: datetime) -> tuple[StuckRun, ...]:
    rows = (
        ImportRun.objects.filter(stuck_runs_q(now))
        .order_by("updated_at", "id")
        .values_list(
            "id",
            "organisation__slug",
            "status",
            "stage",
            "updated_at",
            "lease_owner",
            "lease_expires_at",
        )[:STUCK_LISTED]
    )
    stuck = []
    for run_id, slug, status, stage, updated_at, owner, expires in rows:
        if owner and expires is not None and expires < now:
            reason = f"its worker's lease expired {_ago(now - expires)} ago"
        else:
            reason = f"no progress for {_ago(now - updated_at)}"
        stuck.append(StuckRun(str(run_id), slug, status, stage, updated_at, expires, reason))
    return tuple(stuck)


def _ago(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def _organisations(limit: int | None) -> tuple[tuple[OrganisationPages, ...], int]:
    rows = Organisation.objects.order_by("-pages_reserved", "-pages_used", "slug").values(
        "slug", "name", "page_limit", "pages_used", "pages_reserved"
    )
    if limit is None:
        found = tuple(OrganisationPages(**row) for row in rows)
        return found, len(found)
    return tuple(OrganisationPages(**row) for row in rows[:limit]), Organisation.objects.count()


def _priorities(redis_state, stage: str, now: datetime) -> tuple[PriorityQueueStats, ...]:
    return tuple(
        PriorityQueueStats(
            priority=str(priority),
            waiting=redis_state.priorities[stage, priority].waiting,
            queue_lag_seconds=age_seconds(
                now, redis_state.priorities[stage, priority].head_enqueued_at
            ),
        )
        for priority in PRIORITIES
    )


def _paused(redis_state: RedisState | None, stage: str, now: datetime) -> float | None:
    until = redis_state.paused_until.get(stage) if redis_state else None
    return None if until is None else max(until - now.timestamp(), 0.0)


def pipeline_snapshot(
    *, now: datetime | None = None, organisations_limit: int | None = None
) -> PipelineSnapshot:
    """Every stage now, the workers, stuck runs and pages per organisation
    (the `organisations_limit` holding most, or all)."""
    now = now or timezone.now()
    runs, attempts = _run_counts(now), _attempt_counts(now)
    try:
        redis_state = read_redis_state(stats_connection(), now)
    except RedisError:
        redis_state = None
    workers = workers_from(redis_state.workers) if redis_state else None
    stages = []
    for spec in STAGES:
        run = runs.get(spec.name, {})
        attempt = attempts.get(spec.name, {})
        queue = redis_state.queues[spec.name] if redis_state else None
        stages.append(
            StageStats(
                name=str(spec.name),
                waiting=queue.waiting if queue else None,
                started_jobs=queue.started if queue else None,
                scheduled_jobs=queue.scheduled if queue else None,
                queue_lag_seconds=age_seconds(now, queue.head_enqueued_at) if queue else None,
                workers=(
                    sum(1 for w in workers if spec.name in w.stages)
                    if workers is not None
                    else None
                ),
                priorities=_priorities(redis_state, spec.name, now) if redis_state else None,
                due=run.get("due", 0),
                running=run.get("running", 0),
                retry_scheduled=run.get("retry_scheduled", 0),
                stuck=run.get("stuck", 0),
                lag_seconds=age_seconds(now, run.get("oldest_due_at")),
                failed_last_hour=run.get("failed", 0),
                dead_lettered_last_hour=run.get("dead", 0),
                done_5m=attempt.get("done_5m", 0),
                failed_5m=attempt.get("failed_5m", 0),
                done_15m=attempt.get("done_15m", 0),
                failed_15m=attempt.get("failed_15m", 0),
                done_60m=attempt.get("done_60m", 0),
                failed_60m=attempt.get("failed_60m", 0),
                p50_seconds=attempt.get("p50"),
                p95_seconds=attempt.get("p95"),
                paused_seconds=_paused(redis_state, spec.name, now),
            )
        )
    organisations, organisations_total = _organisations(organisations_limit)
    return PipelineSnapshot(
        taken_at=now,
        stages=tuple(stages),
        workers=workers,
        suspended=redis_state.suspended if redis_state else None,
        redis_ok=redis_state is not None,
        stuck_total=sum(s.stuck for s in stages),
        stuck_runs=_stuck_runs(now),
        organisations=organisations,
        organisations_total=organisations_total,
    )
