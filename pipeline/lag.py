"""Each stage's lag (how long its oldest due run has waited for a worker), and a sample
of it kept every minute for the dashboard's chart.

Lag is not in the database after the fact (a run's due time is overwritten as it moves
on), so it is sampled: once a minute whoever comes first (the sweeper's loop, a
dashboard load, a /metrics scrape) records every stage's lag in a Redis sorted set that
keeps two hours. A minute nobody sampled (no sweeper running, Redis flushed) is a gap
in the chart, not a zero.
"""

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import Min, Q
from django.utils import timezone
from redis import Redis
from redis.exceptions import RedisError

from core.redis import stats_connection
from pipeline.models import ACTIVE_STATUSES, ImportRun
from pipeline.stage_list import STAGES

logger = logging.getLogger(__name__)

LAG_KEY = "paperlane:stats:lag"
LAG_KEEP_SECONDS = 2 * 3600


@dataclass(frozen=True)
class LagSample:
    minute: datetime
    # stage -> seconds its oldest due run had waited (None: nothing was waiting).
    lags: dict[str, float | None]


def minute_start(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def due_now_q(now: datetime) -> Q:
    """Runs whose stage is due and that no worker holds: waiting for a worker."""
    return Q(status__in=ACTIVE_STATUSES, lease_owner="") & (
        Q(due_at__isnull=True) | Q(due_at__lte=now)
    )


def stage_lags(*, now: datetime | None = None) -> dict[str, float | None]:
    """Each stage's lag alone (the age of its oldest due run with no worker): one query."""
    now = now or timezone.now()
    rows = dict(
        ImportRun.objects.filter(due_now_q(now))
        .values("stage")
        .order_by()
        .annotate(oldest=Min("due_at"))
        .values_list("stage", "oldest")
    )
    return {spec.name: age_seconds(now, rows.get(spec.name)) for spec in STAGES}


def age_seconds(now: datetime, then: datetime | None) -> float | None:
    """How long before `now` `then` was (never below 0), or None without a `then`."""
    return max((now - then).total_seconds(), 0.0) if then is not None else None


def lag_sample_record(
    *,
    read_lags: Callable[[], dict[str, float | None]],
    now: datetime | None = None,
    connection: Redis | None = None,
) -> bool:
    """Record each stage's lag for the current minute unless someone already did.

    `read_lags` is only called when this caller is the minute's first. Never
    raises: a lost sample is a gap in a chart. True if a sample was recorded.
    """
    now = now or timezone.now()
    minute = int(minute_start(now).timestamp())
    connection = connection or stats_connection()
    try:
        if not connection.set(f"{LAG_KEY}:minute:{minute}", 1, nx=True, ex=180):
            return False
        sample = json.dumps({"minute": minute, "lags": read_lags()})
        with connection.pipeline(transaction=False) as pipe:
            pipe.zadd(LAG_KEY, {sample: minute})
            pipe.zremrangebyscore(LAG_KEY, "-inf", minute - LAG_KEEP_SECONDS)
            pipe.expire(LAG_KEY, LAG_KEEP_SECONDS)
            pipe.execute()
    except Exception:  # Redis or the database away: the sample is skipped
        logger.warning("could not record this minute's lag sample", exc_info=True)
        return False
    return True


def lag_history(
    *, now: datetime | None = None, minutes: int = 60, connection: Redis | None = None
) -> list[LagSample]:
    """The lag samples of the last `minutes` minutes, oldest first ([] if Redis is away)."""
    now = now or timezone.now()
    first = minute_start(now) - timedelta(minutes=minutes - 1)
    connection = connection or stats_connection()
    try:
        raw = connection.zrangebyscore(LAG_KEY, int(first.timestamp()), "+inf")
    except RedisError:
        return []
    samples = {}
    for member in raw:
        data = json.loads(member)
        lags = {spec.name: data["lags"].get(spec.name) for spec in STAGES}
        samples[data["minute"]] = LagSample(datetime.fromtimestamp(data["minute"], UTC), lags)
    return [samples[minute] for minute in sorted(samples)]
