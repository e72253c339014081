"""The embedding provider as operators see it: its breaker's state, the runs waiting for
it and its last error.

The breaker (core/provider_breaker.py) keeps its state in one Redis hash: `failures` (in a
row, while it is closed), `until` (when its pause ends, epoch seconds) and `opens` (how
many times it opened since the last success). A success deletes the hash. This reads it,
and never writes it. The runs waiting are those whose last try failed while the breaker
was open (`PROVIDER_OUTAGE`, pipeline/errors.py): they keep their tries and are tried
again when the pause ends.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from redis.exceptions import RedisError

from core.provider_breaker import breaker
from core.redis import stats_connection
from pipeline.errors import PROVIDER_OUTAGE
from pipeline.models import ACTIVE_STATUSES, ImportRun, Stage, StageAttempt
from retrieval.embedding import PROVIDER

# How far back the last error is looked for.
LAST_ERROR_WITHIN = timedelta(hours=1)


@dataclass(frozen=True)
class ProviderStats:
    # The error code of the runs waiting (for the admin's run list).
    code = PROVIDER_OUTAGE

    # "closed", "failing" (closed, but its last calls failed), "paused" (open: no embed
    # job is taken until `until`) or "probing" (open, the pause is over: the next call
    # decides); None when Redis did not answer.
    state: str | None
    failures: int
    opens: int
    until: datetime | None
    # Runs at embed whose last try failed while the provider was out.
    waiting: int
    last_error: str
    last_error_at: datetime | None

    @property
    def out(self) -> bool:
        """The breaker opened and no call has gone through since: an outage."""
        return self.state in ("paused", "probing")


def breaker_read(*, now: datetime) -> tuple[str, int, int, datetime | None]:
    """The provider's breaker as its hash says: (state, failures in a row, opens, until).
    RedisError if Redis does not answer."""
    read = breaker(PROVIDER).state(stats_connection())
    if read is None:
        return "closed", 0, 0, None
    ends = datetime.fromtimestamp(read.until, tz=now.tzinfo) if read.until is not None else None
    if read.out(now.timestamp()):
        state = "paused" if read.paused_for(now.timestamp()) > 0 else "probing"
    else:
        state = "failing" if read.failures else "closed"
    return state, read.failures, read.opens, ends


def runs_waiting_for_provider() -> int:
    """Runs at embed, queued or being tried, whose last try failed while the provider was
    out (the error code's index finds them; a success clears the code)."""
    return ImportRun.objects.filter(
        error_code=PROVIDER_OUTAGE, status__in=ACTIVE_STATUSES, stage=Stage.EMBED
    ).count()


def provider_stats(*, now: datetime) -> ProviderStats:
    """The embedding provider now: one Redis read and two small indexed queries."""
    try:
        state, failures, opens, until = breaker_read(now=now)
    except RedisError:
        state, failures, opens, until = None, 0, 0, None
    # The newest embed try that failed transiently (newest first on the outcome's index).
    last = (
        StageAttempt.objects.filter(
            outcome=StageAttempt.Outcome.TRANSIENT_ERROR,
            started_at__gte=now - LAST_ERROR_WITHIN,
            stage=Stage.EMBED,
        )
        .order_by("-started_at", "-id")
        .values_list("error_message", "finished_at")
        .first()
    )
    return ProviderStats(
        state=state,
        failures=failures,
        opens=opens,
        until=until,
        waiting=runs_waiting_for_provider(),
        last_error=last[0] if last else "",
        last_error_at=last[1] if last else None,
    )
