"""Counters that only go up: stage attempts by outcome and error code, retries, durations.

They are counts of StageAttempt rows, so they survive restarts and agree across
web processes. Counting every attempt ever on each scrape would read the whole
table; instead the counts of attempts that finished more than SETTLED_AFTER ago
(final: an attempt's finished_at is written once, when it ends) are kept in
Redis with the time they run to, and each read adds only what finished since.
If Redis lost the rollup (or does not answer), it is counted again from the
database; the sum is the same either way.
"""

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Count, Q, QuerySet, Sum
from django.utils import timezone
from redis.exceptions import RedisError, WatchError

from core.redis import stats_connection
from operations.stats.base import TIMED_OUTCOMES, attempt_duration
from pipeline.models import StageAttempt

logger = logging.getLogger(__name__)

# Upper bounds (seconds) of the stage duration histogram's buckets; +Inf is implied.
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
# Attempts that finished longer ago than this are final and go into the rollup.
SETTLED_AFTER = timedelta(hours=1)
# The rollup moves forward at most this often.
ADVANCE_EVERY = timedelta(minutes=1)
ROLLUP_KEY = "paperlane:stats:attempt-totals:v2"


@dataclass
class Durations:
    """A cumulative histogram: buckets[i] counts attempts of at most DURATION_BUCKETS[i] s."""

    buckets: list[int] = field(default_factory=lambda: [0] * len(DURATION_BUCKETS))
    count: int = 0
    sum_seconds: float = 0.0

    def add(self, other: "Durations") -> None:
        self.buckets = [a + b for a, b in zip(self.buckets, other.buckets, strict=True)]
        self.count += other.count
        self.sum_seconds += other.sum_seconds


@dataclass
class AttemptTotals:
    # (stage, outcome, error code) -> finished attempts; the code is the one the run
    # got ("timeout", "damaged_pdf", "worker_lost"), "" when there was none.
    attempts: dict[tuple[str, str, str], int] = field(default_factory=dict)
    # stage -> attempts that repeated a stage of the same run generation.
    retries: dict[str, int] = field(default_factory=dict)
    # stage -> durations of attempts that ran to an outcome (TIMED_OUTCOMES).
    durations: dict[str, Durations] = field(default_factory=dict)

    def add(self, other: "AttemptTotals") -> None:
        for key, n in other.attempts.items():
            self.attempts[key] = self.attempts.get(key, 0) + n
        for stage, n in other.retries.items():
            self.retries[stage] = self.retries.get(stage, 0) + n
        for stage, histogram in other.durations.items():
            self.durations.setdefault(stage, Durations()).add(histogram)

    def to_json(self) -> dict:
        return {
            "attempts": [[*key, n] for key, n in sorted(self.attempts.items())],
            "retries": self.retries,
            "durations": {
                stage: [h.buckets, h.count, h.sum_seconds] for stage, h in self.durations.items()
            },
        }

    @classmethod
    def from_json(cls, data: dict) -> "AttemptTotals":
        return cls(
            attempts={(s, o, e): n for s, o, e, n in data["attempts"]},
            retries=dict(data["retries"]),
            durations={
                stage: Durations(list(buckets), count, total)
                for stage, (buckets, count, total) in data["durations"].items()
            },
        )


def attempts_counted(attempts: QuerySet) -> AttemptTotals:
    """The totals of the finished attempts in `attempts`: two grouped queries."""
    attempts = attempts.filter(finished_at__isnull=False).exclude(
        outcome=StageAttempt.Outcome.RUNNING
    )
    totals = AttemptTotals()
    rows = (
        attempts.values("stage", "outcome", "error_code")
        .order_by()
        .annotate(n=Count("id"), retries=Count("id", filter=Q(number__gt=1)))
    )
    for row in rows:
        totals.attempts[(row["stage"], row["outcome"], row["error_code"])] = row["n"]
        totals.retries[row["stage"]] = totals.retries.get(row["stage"], 0) + row["retries"]
    buckets = {
        f"le{i}": Count("id", filter=Q(duration__lte=timedelta(seconds=bound)))
        for i, bound in enumerate(DURATION_BUCKETS)
    }
    rows = (
        attempts.filter(outcome__in=TIMED_OUTCOMES)
        .alias(duration=attempt_duration())
        .values("stage")
        .order_by()
        .annotate(n=Count("id"), total=Sum("duration"), **buckets)
    )
    for row in rows:
        totals.durations[row["stage"]] = Durations(
            buckets=[row[f"le{i}"] for i in range(len(DURATION_BUCKETS))],
            count=row["n"],
            sum_seconds=row["total"].total_seconds() if row["total"] else 0.0,
        )
    return totals


def attempt_totals(*, now: datetime | None = None) -> AttemptTotals:
    """Every finished stage attempt so far, counted; only goes up (unless runs are deleted)."""
    now = now or timezone.now()
    finished = StageAttempt.objects.all()
    rolled = _rollup(finished, horizon=now - SETTLED_AFTER)
    if rolled is None:
        return attempts_counted(finished)
    totals, until = rolled
    totals.add(attempts_counted(finished.filter(finished_at__gte=until)))
    return totals


def _rollup(finished: QuerySet, *, horizon: datetime) -> tuple[AttemptTotals, datetime] | None:
    """The totals of attempts that finished before a recent time, and that time;
    None if Redis does not answer."""
    connection = stats_connection()
    try:
        raw = connection.get(ROLLUP_KEY)
    except RedisError:
        logger.warning("the attempt totals rollup is unreachable; counting from the database")
        return None
    if raw:
        stored = json.loads(raw)
        until = datetime.fromisoformat(stored["until"])
        totals = AttemptTotals.from_json(stored["totals"])
        if until >= horizon - ADVANCE_EVERY:
            return totals, until
        settled = finished.filter(finished_at__gte=until, finished_at__lt=horizon)
        totals.add(attempts_counted(settled))
    else:
        totals = attempts_counted(finished.filter(finished_at__lt=horizon))
    value = json.dumps({"until": horizon.isoformat(), "totals": totals.to_json()})
    _store_unless_changed(connection, raw, value)
    return totals, horizon


def _store_unless_changed(connection, expected: bytes | None, value: str) -> None:
    # Two scrapes may advance the rollup at once; either result is right, keep the first.
    try:
        with connection.pipeline(transaction=True) as pipe:
            pipe.watch(ROLLUP_KEY)
            if pipe.get(ROLLUP_KEY) != expected:
                return
            pipe.multi()
            pipe.set(ROLLUP_KEY, value)
            pipe.execute()
    except (WatchError, RedisError):
        pass
