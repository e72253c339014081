"""The last hour, minute by minute: attempts finished, from StageAttempt.finished_at in
one grouped query. Each stage's lag over the same hour is sampled (pipeline/lag.py)."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import Count, Q
from django.db.models.functions import TruncMinute
from django.utils import timezone

from operations.stats.base import FAILED_OUTCOMES
from pipeline.lag import minute_start
from pipeline.models import StageAttempt

MINUTES = 60


@dataclass(frozen=True)
class Minute:
    start: datetime
    done: int
    failed: int


def throughput_by_minute(*, now: datetime | None = None) -> list[Minute]:
    """Stage attempts that succeeded or failed in each of the last MINUTES minutes,
    oldest first, the current (partial) minute last; minutes with none are zeros."""
    now = now or timezone.now()
    first = minute_start(now) - timedelta(minutes=MINUTES - 1)
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
