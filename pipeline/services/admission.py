"""Admission control at accept: refuse an upload at once, recording nothing, when the
pipeline cannot keep its promise to it.

Uploads (people's and the API's) are interactive work; connector imports are bulk and
never come through here. An upload is refused with `SystemBusy` (429, Retry-After) when
- the interactive runs not yet ended reach PAPERLANE_ADMISSION_BACKLOG_BOUND,
- one of them has waited for a worker longer than PAPERLANE_ADMISSION_PROMISE_SECONDS, or
- its organisation has PAPERLANE_ADMISSION_ORGANISATION_BOUND of them in flight, so one
  organisation's backfill cannot fill the system, or
- its organisation's documents lately failed after costing the workers real work: each
  extraction that fails after more than FREE_FAILED_CPU_SECONDS of CPU holds the
  organisation's uploads for as long as that CPU (added up, `admission_hold_failed_work`),
  so a file that fails expensively cannot be sent again and again for free, and only its
  organisation waits.

The three counts are one statement (`_COUNTS_SQL`), each a bounded scan of a partial
index (pipeline/migrations/0006): counts stop at bound + 1 and never COUNT the table. It is
written by hand because it runs on every upload: built by the ORM, the three counts
took about a third of the web process's CPU per upload. `admission_check` runs before
the bytes are stored. The organisation's bound is checked again inside the accept
transaction, after the organisation row lock that the quota reservation takes:
concurrent uploads of one organisation count one after another there, so the bound
holds exactly.

Retry-After comes from the drain rate measured on the interactive runs that ended in
the last minute (the organisation's own, for its bound). Refused callers get successive
slots 1/rate apart, kept in Redis so that every web process hands out the same sequence
(per process while Redis is away): they do not all come back at once, and in the common
case there is room for each when it does.
"""

import math
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache

from django.conf import settings
from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone
from redis import Redis
from redis.commands.core import Script

from core.errors import SystemBusy
from core.rate_limit import rate_hold, rate_take
from core.redis import request_breaker, request_connection
from pipeline.models import ACTIVE_STATUSES, TERMINAL_STATUSES, ImportRun, RunPriority

BACKLOG, LATE, ORGANISATION, FAILURES = "backlog", "late", "organisation", "failures"
REASONS = (BACKLOG, LATE, ORGANISATION, FAILURES)

# The drain rate is measured over the runs that ended in this window, the latest
# DRAIN_SAMPLE of them, and over at least DRAIN_MIN_SPAN_SECONDS, so that a few runs
# ending together do not read as a flood (an overestimate would send callers back early).
DRAIN_WINDOW_SECONDS = 60
DRAIN_SAMPLE = 500
DRAIN_MIN_SPAN_SECONDS = 5.0
# Waiting runs past the promise are counted up to this many (to size the Retry-After).
LATE_COUNT_LIMIT = 1000
# Retry-After when no run ended lately (no drain rate to compute it from), and at most.
RETRY_AFTER_DEFAULT_SECONDS = 30
RETRY_AFTER_MAX_SECONDS = 900

SLOT_KEY = "paperlane:admission:slot:"
FAILED_WORK_KEY = "paperlane:admission:failed-work:{organisation}"
# A failed extraction that used less CPU than this holds nothing: a damaged file found
# damaged at once costs the workers nothing worth pricing.
FREE_FAILED_CPU_SECONDS = 1.0
REFUSALS_KEY = "paperlane:stats:admission_refusals"


class OrganisationAtBound(Exception):
    """Raised inside the accept transaction; the caller rolls back, then refuses."""


# Interactive runs not yet ended: all of them, those waiting for a worker since before
# `late_before`, and the organisation's. Each count stops at its LIMIT (0 skips it).
_ACTIVE = {f"active_{i}": status for i, status in enumerate(ACTIVE_STATUSES)}
_IN_FLIGHT_SQL = (
    f"SELECT 1 FROM {ImportRun._meta.db_table} WHERE status IN "
    f"({', '.join(f'%({name})s' for name in _ACTIVE)}) AND priority = %(interactive)s"
)
_COUNTS_SQL = f"""
SELECT
    (SELECT COUNT(*) FROM ({_IN_FLIGHT_SQL} LIMIT %(backlog_limit)s) AS backlog),
    (SELECT COUNT(*) FROM ({_IN_FLIGHT_SQL} AND lease_owner = '' AND due_at < %(late_before)s
        LIMIT %(late_limit)s) AS late),
    (SELECT COUNT(*) FROM ({_IN_FLIGHT_SQL} AND organisation_id = %(organisation_id)s
        LIMIT %(organisation_limit)s) AS organisation)
"""


@dataclass(frozen=True)
class _Counts:
    backlog: int
    late: int
    organisation: int


def _counts(
    *,
    organisation_id: int,
    backlog_limit: int = 0,
    late_before: datetime | None = None,
    late_limit: int = 0,
    organisation_limit: int = 0,
) -> _Counts:
    params = {
        **_ACTIVE,
        "interactive": RunPriority.INTERACTIVE,
        "backlog_limit": backlog_limit,
        "late_before": late_before or timezone.now(),
        "late_limit": late_limit if late_before else 0,
        "organisation_id": organisation_id,
        "organisation_limit": organisation_limit,
    }
    with connection.cursor() as cursor:
        cursor.execute(_COUNTS_SQL, params)
        return _Counts(*cursor.fetchone())


def _drain_rate(ended: QuerySet, now: datetime) -> float | None:
    """Runs ended per second lately, or None when none ended in the window."""
    since = now - timedelta(seconds=DRAIN_WINDOW_SECONDS)
    ends = list(
        ended.filter(status__in=TERMINAL_STATUSES, finished_at__gte=since)
        .order_by("-finished_at")
        .values_list("finished_at", flat=True)[:DRAIN_SAMPLE]
    )
    if not ends:
        return None
    span = (now - ends[-1]).total_seconds()
    return len(ends) / min(max(span, DRAIN_MIN_SPAN_SECONDS), DRAIN_WINDOW_SECONDS)


def _interactive_ended() -> QuerySet:
    return ImportRun.objects.filter(priority=RunPriority.INTERACTIVE)


class _LocalSlots:
    """The slots of this process alone, for when Redis is away."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}

    def take(self, scope: str, *, now: float, wait: float, step: float, ceiling: float) -> float:
        with self._lock:
            slot = min(max(self._last.get(scope, 0.0) + step, now + wait), now + ceiling)
            self._last[scope] = slot
            return slot


_local_slots = _LocalSlots()

# KEYS: the scope's slot, the refusal counters. ARGV: now, wait, step, ceiling, reason.
# The next slot is `step` after the last one given, and no sooner than now + wait.
_TAKE_SLOT = """
local now, wait, step, ceiling = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]),
    tonumber(ARGV[4])
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
local slot = math.min(math.max(last + step, now + wait), now + ceiling)
local text = string.format('%.3f', slot)
redis.call('SET', KEYS[1], text, 'EX', math.ceil(ceiling) + 60)
redis.call('HINCRBY', KEYS[2], ARGV[5], 1)
return text
"""


@cache
def _slot_script(connection: Redis) -> Script:
    return connection.register_script(_TAKE_SLOT)


def _take_slot(scope: str, *, reason: str, wait: float, step: float) -> float:
    """Seconds from now until the refused caller's turn; counts the refusal."""
    # Milliseconds, as the slots are kept: a wait of 120 s must read 120 s, not 120.0004.
    now, ceiling = round(time.time(), 3), RETRY_AFTER_MAX_SECONDS
    breaker = request_breaker()
    if not breaker.open:
        try:
            script = _slot_script(request_connection())
            keys = [SLOT_KEY + scope, REFUSALS_KEY]
            slot = float(script(keys=keys, args=[f"{now:.3f}", wait, step, ceiling, reason]))
            return slot - now
        except Exception:  # a refusal must stay instant: fall back to this process's slots
            breaker.trip("handing out an admission slot")
    return _local_slots.take(scope, now=now, wait=wait, step=step, ceiling=ceiling) - now


def _in_words(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds} second{'' if seconds == 1 else 's'}"
    minutes = math.ceil(seconds / 60)
    return f"{minutes} minute{'' if minutes == 1 else 's'}"


def _refusal(
    *, reason: str, scope: str, excess: int, rate: float | None, busy_with: str = ""
) -> SystemBusy:
    """The refusal for a caller that must wait for `excess` runs to end at `rate` per second."""
    if rate:
        # The k-th caller refused before the queue moves waits for excess + k ends.
        wait, step = excess / rate, 1 / rate
    else:
        # Nothing ended in the window (workers stopped, or idle until this burst): no rate
        # to compute from, so the default, the same for every caller.
        wait, step = RETRY_AFTER_DEFAULT_SECONDS, 0.0
    seconds = _take_slot(scope, reason=reason, wait=wait, step=step)
    # Whole seconds, rounded up (less a float's error), at least 1 and at most the maximum.
    retry_after = min(max(math.ceil(seconds - 1e-6), 1), RETRY_AFTER_MAX_SECONDS)
    return SystemBusy(
        f"The system is busy{busy_with}; please try again in {_in_words(retry_after)}.",
        retry_after=retry_after,
        reason=reason,
    )


def admission_organisation_over(*, organisation_id: int) -> bool:
    """True when the organisation has more than its bound of interactive runs in flight,
    counting the one being accepted.

    Inside the accept transaction, call it after that run is written and `quota_take` has
    locked the organisation's row: the count then sees every run committed before ours."""
    bound = settings.PAPERLANE_ADMISSION_ORGANISATION_BOUND
    if not bound:
        return False
    counts = _counts(organisation_id=organisation_id, organisation_limit=bound + 1)
    return counts.organisation > bound


def admission_organisation_refusal(
    *, organisation_id: int, in_flight: int | None = None
) -> SystemBusy:
    """The SystemBusy for an organisation at its bound, its wait from its own drain rate."""
    bound = settings.PAPERLANE_ADMISSION_ORGANISATION_BOUND
    if in_flight is None:
        counts = _counts(organisation_id=organisation_id, organisation_limit=bound + 1)
        in_flight = counts.organisation
    now = timezone.now()
    rate = _drain_rate(_interactive_ended().filter(organisation_id=organisation_id), now)
    return _refusal(
        reason=ORGANISATION,
        scope=f"org:{organisation_id}",
        excess=max(in_flight - bound, 0) + 1,
        rate=rate,
        busy_with=f" with {bound} of your organisation's documents",
    )


def admission_hold_failed_work(*, organisation_id, cpu_seconds: float) -> None:
    """An extraction of the organisation's failed after `cpu_seconds` of CPU: its uploads
    wait that much longer (nothing under FREE_FAILED_CPU_SECONDS). Raises
    RateLimitUnavailable if Redis does not answer."""
    if cpu_seconds >= FREE_FAILED_CPU_SECONDS:
        key = FAILED_WORK_KEY.format(organisation=organisation_id)
        rate_hold(key=key, seconds=cpu_seconds, add=True)


def _check_failed_work(organisation_id) -> None:
    key = FAILED_WORK_KEY.format(organisation=organisation_id)
    # The request's client and breaker: Redis away admits the upload.
    waits = rate_take(rules=(), hold_key=key, fail_open=True)
    if waits:
        scope = f"failures:{organisation_id}"
        seconds = _take_slot(scope, reason=FAILURES, wait=waits[key], step=0)
        retry_after = min(max(math.ceil(seconds - 1e-6), 1), RETRY_AFTER_MAX_SECONDS)
        raise SystemBusy(
            "Your organisation's recent documents failed after using the workers for "
            f"a while; please try again in {_in_words(retry_after)}. The failed "
            "documents say why they failed.",
            retry_after=retry_after,
            reason=FAILURES,
        )


def admission_check(*, organisation_id: int) -> None:
    """Raise SystemBusy if the pipeline has no room for an upload of the organisation now.

    Call before anything is stored: a refusal records nothing and holds no pages."""
    _check_failed_work(organisation_id)
    now = timezone.now()
    bound = settings.PAPERLANE_ADMISSION_BACKLOG_BOUND
    promise = settings.PAPERLANE_ADMISSION_PROMISE_SECONDS
    organisation_bound = settings.PAPERLANE_ADMISSION_ORGANISATION_BOUND
    if not (bound or promise or organisation_bound):
        return
    counts = _counts(
        organisation_id=organisation_id,
        backlog_limit=bound + 1 if bound else 0,
        # Due, held by no worker, since before the promise: (status, due_at) order.
        late_before=now - timedelta(seconds=promise) if promise else None,
        late_limit=LATE_COUNT_LIMIT,
        organisation_limit=organisation_bound + 1 if organisation_bound else 0,
    )
    if bound and counts.backlog >= bound:
        rate = _drain_rate(_interactive_ended(), now)
        raise _refusal(reason=BACKLOG, scope="all", excess=counts.backlog - bound + 1, rate=rate)
    if counts.late:
        rate = _drain_rate(_interactive_ended(), now)
        raise _refusal(reason=LATE, scope="all", excess=counts.late, rate=rate)
    if organisation_bound and counts.organisation >= organisation_bound:
        raise admission_organisation_refusal(
            organisation_id=organisation_id, in_flight=counts.organisation
        )


def admission_refusal_counts(*, connection: Redis) -> dict[str, int]:
    """Uploads refused at admission, by reason; raises RedisError if Redis is away."""
    counts = dict.fromkeys(REASONS, 0)
    for reason, value in connection.hgetall(REFUSALS_KEY).items():
        counts[reason.decode()] = int(value)
    return counts
