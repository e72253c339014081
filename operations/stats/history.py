"""The last hour, minute by minute: attempts finished (from the database) and each
stage's lag (sampled).

Throughput comes from StageAttempt.finished_at, one grouped query. Lag is not in
the database after the fact (a run's due time is overwritten as it moves on), so
it is sampled: once a minute whoever comes first (the sweeper's loop, a dashboard
load, a /metrics scrape) records every stage's lag in a Redis sorted set that
keeps two hours. A minute nobody sampled (no sweeper running, Redis flushed) is a
gap in the chart, not a zero.
"""

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import Count, Q
from django.db.models.functions import TruncMinute
from django.utils import timezone
from redis import Redis
from redis.exceptions import RedisError

from operations.stats.base import FAILED_OUTCOMES, stats_connection
from pipeline.models import StageAttempt
from pipeline.stage_list import STAGES

logger = logging.getLogger(__name__)

MINUTES = 60
LAG_KEY = "paperlane:stats:lag"
LAG_KEEP_SECONDS = 2 * 3600


@dataclass(frozen=True)
class Minute:
    start: datetime
    done: int
    failed: int


@dataclass(frozen=True)
class LagSample:
    minute: datetime
    # stage -> seconds its oldest due run had waited (None: nothing was waiting).
    lags: dict[str, float | None]


def _minute_start(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def throughput_by_minute(*, now: datetime | None = None) -> list[Minute]:
    """Stage attempts that succeeded or failed in each of the last MINUTES minutes,
    oldest first, the current (partial) minute last; minutes with none are zeros."""
    now = now or timezone.now()
    first = _minute_start(now) - timedelta(minutes=MINUTES - 1)
    rows = (
        StageAttempt.objects.filter(finished_at__gte=first)
        .annotate(minute=TruncMinute("finished_at", tzinfo=UTC))
        .values("minute")
        .order_by()
        .annotate(
            done=Count("id", filter=Q(outcome=StageAttempt.Outcome.SUCCEEDED)),
            failed=Count("id", filter=Q(outcome__in=FAILED_OUTCOMES)),
        )
    )
    counted = {row["minute"]: (row["done"], row["failed"]) for row in rows}
    minutes = []
    for offset in range(MINUTES):
        start = first + timedelta(minutes=offset)
        done, failed = counted.get(start, (0, 0))
        minutes.append(Minute(start=start, done=done, failed=failed))
    return minutes


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
    minute = int(_minute_start(now).timestamp())
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


def lag_history(*, now: datetime | None = None, connection: Redis | None = None) -> list[LagSample]:
    """The lag samples of the last MINUTES minutes, oldest first ([] if Redis is away)."""
    now = now or timezone.now()
    first = _minute_start(now) - timedelta(minutes=MINUTES - 1)
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
