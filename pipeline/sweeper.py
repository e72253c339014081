"""The sweeper: the database is the truth, so repair whatever Redis lost.

One pass:
1. runs whose worker stopped renewing its lease: record the crash, then
   resume the stage elsewhere (or dead-letter a poison run); and attempts still
   marked running that no worker can still be at (past their stage's timeout):
   closed as abandoned;
2. runs with a stage due (or a retry scheduled) but no job waiting in Redis
   (Redis flushed, a callback that never ran, an enqueue that failed at
   accept, a job stuck with a dead worker, a job marked queued whose id is in
   no list a worker reads, or was left half taken by a worker that died): enqueue it
   again. With a sweeper on every host (`sweep --loop`), one of them looks each
   interval (a lock in Redis), not all;
3. ended runs that still hold pages: release them;
4. direct uploads whose time to be completed is over: removed, with the object of
   each one never completed (documents/services/pending_uploads.py);
5. the words documents brought into search and took out of it, added to their
   organisations' vocabularies (documents/services/vocabulary.py), the oldest
   500 changes a pass;
6. what other apps registered to be done with every pass (`sweeper_step_register`: the
   webhook endpoints with deliveries due and no worker, woken);
7. only when asked, the housekeeping (`sweep --loop` does it every
   HOUSEKEEPING_INTERVAL_SECONDS, on one host each interval: a lock in Redis): stored
   files no document points to, older than ORPHAN_GRACE_SECONDS, are deleted, looking
   at ORPHAN_KEYS_PER_PASS keys a pass and going on from where the last pass stopped
   (kept in Redis); then what other apps registered to be done with it
   (`sweeper_housekeeping_register`: the connectors' old syncs).

Each step looks at a bounded number of runs (or files), oldest first, so a
pass stays short and whatever it leaves is the oldest work of the next pass.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone
from redis import Redis
from redis.exceptions import RedisError

from core.redis import redis_connection
from documents.models import QuotaReservation
from documents.services.orphans import stored_orphans_remove
from documents.services.pending_uploads import pending_uploads_remove_expired
from documents.services.quota import quota_release
from documents.services.vocabulary import vocabulary_apply
from pipeline import broker, dispatch
from pipeline.dispatch import DISPATCH_FIELDS, WAITING_STATUSES, current_job_id, enqueue_current
from pipeline.models import ACTIVE_STATUSES, TERMINAL_STATUSES, ImportRun, RunStatus
from pipeline.queues import is_served_queue
from pipeline.services.take_back import attempts_abandon_unreported, run_abandon_expired

logger = logging.getLogger(__name__)

# Runs one pass may repair per step (abandon a lease, release pages): a transaction each.
REPAIRS_PER_PASS = 500
# Runs one pass may check for a lost job: only read, so many more, asked of Redis in batches.
DELIVERIES_CHECKED_PER_PASS = 10_000
# Expired direct uploads one pass may remove: a transaction each, and a storage DELETE
# for each one never completed.
UPLOADS_PER_PASS = 200
# Stored files no document points to (an accept killed before its commit) are deleted
# once older than the grace, by a housekeeping pass run every interval.
ORPHAN_GRACE_SECONDS = 3600
HOUSEKEEPING_INTERVAL_SECONDS = 3600.0
# Stored keys one such pass looks at, going on from where the last one stopped (on S3,
# a LIST request per 1,000 and a database query per 500): a pass over a large bucket
# stays short, and a whole walk takes (keys / this) intervals.
ORPHAN_KEYS_PER_PASS = 1_000_000
# Stored files one orphan pass may delete.
ORPHANS_PER_PASS = 1_000
# Jobs asked about in one Redis round trip.
REDIS_BATCH = 500
# A key the sweepers keep in the workers' Redis. Gone means Redis lost its data (flushed,
# or restarted without persistence), and every waiting job with it: a sweeper that sees
# it gone passes at once rather than at its next interval (`sweep --loop`).
MARKER_KEY = "paperlane:sweeper:marker"
# Held by the sweeper (of whichever host) that checks Redis for lost jobs, for most of an
# interval: with a sweeper on every host, one of them looks each interval, not all.
CHECK_LOCK_KEY = "paperlane:sweeper:checking"
CHECK_LOCK_SHARE = 0.8  # of PAPERLANE_SWEEP_INTERVAL_SECONDS
# The same for the housekeeping, for most of HOUSEKEEPING_INTERVAL_SECONDS.
HOUSEKEEPING_LOCK_KEY = "paperlane:sweeper:housekeeping"
# The last stored key the orphan pass looked at: the next pass goes on after it. Lost with
# Redis's data, the walk starts again from the first key.
ORPHANS_RESUME_KEY = "paperlane:sweeper:orphans_after"


@dataclass
class SweepReport:
    abandoned: int = 0
    attempts_closed: int = 0
    redelivered: int = 0
    released: int = 0
    uploads_expired: int = 0
    orphans_removed: int = 0
    vocabulary_changes: int = 0
    # What each registered step did, by its name ("webhook endpoints woken": 2).
    steps: dict[str, int] = field(default_factory=dict)
    # What each registered housekeeping task did, by its name ("syncs pruned": 12).
    housekeeping: dict[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        registered = {**self.steps, **self.housekeeping}
        done = "".join(f", {name} {count}" for name, count in registered.items())
        return (
            f"abandoned {self.abandoned}, attempts closed {self.attempts_closed}, "
            f"redelivered {self.redelivered}, "
            f"released {self.released}, uploads expired {self.uploads_expired}, "
            f"vocabulary changes {self.vocabulary_changes}, "
            f"orphans removed {self.orphans_removed}{done}"
        )

    def did_anything(self) -> bool:
        counts = [v for name, v in vars(self).items() if name not in ("steps", "housekeeping")]
        return any(counts) or any(self.steps.values()) or any(self.housekeeping.values())


# Housekeeping that other apps add to the sweeper's (from their AppConfig.ready()): a
# name and a task that removes a bounded number of old rows and says how many.
_HOUSEKEEPING: dict[str, Callable[[], int]] = {}
# Steps other apps add to every pass, the same way: the webhook endpoints with deliveries
# due to wake.
_STEPS: dict[str, Callable[[], int]] = {}


def sweeper_step_register(name: str, task: Callable[[], int]) -> None:
    """Run `task` with every pass (a bounded amount of work); its count is reported under
    `name`."""
    _STEPS[name] = task


def sweeper_housekeeping_register(name: str, task: Callable[[], int]) -> None:
    """Run `task` with each housekeeping pass; its count is reported under `name`."""
    _HOUSEKEEPING[name] = task


def sweep_once(*, housekeeping: bool = False, one_of_many: bool = False) -> SweepReport:
    """One pass; with `housekeeping`, also delete stored files no document points to (a
    walk over a share of the storage, so callers do it far less often than the rest) and
    the registered housekeeping. `one_of_many`: a sweeper runs on every host (`sweep
    --loop`), so this one asks Redis about due runs only if no other sweeper did in
    the last interval, and does the housekeeping only if no other did in its interval;
    the database steps, which cost a query when there is nothing to do, run on every
    host."""
    report = SweepReport()
    report.abandoned = _abandon_expired_leases()
    report.attempts_closed = attempts_abandon_unreported(limit=REPAIRS_PER_PASS)
    if not one_of_many or _take_the_check():
        report.redelivered = _redeliver_lost_jobs()
    report.released = _release_ended_reservations()
    report.uploads_expired = pending_uploads_remove_expired(limit=UPLOADS_PER_PASS)
    report.vocabulary_changes = vocabulary_apply()
    report.steps = {name: task() for name, task in _STEPS.items()}
    if housekeeping and (not one_of_many or _take_the_housekeeping()):
        report.orphans_removed = _remove_orphaned_files()
        report.housekeeping = {name: task() for name, task in _HOUSEKEEPING.items()}
    if report.did_anything():
        logger.info("sweep: %s", report)
    return report


def redis_lost_data() -> bool:
    """True if the marker was missing, and sets it again: the first call against a new
    Redis, or the first since Redis lost its data."""
    return bool(redis_connection().set(MARKER_KEY, b"1", nx=True))


def _take_the_check() -> bool:
    """Whether this sweeper is the one to check Redis for lost jobs this interval. A Redis
    that does not answer says yes: then nobody holds the check, and the check fails anyway.
    A Redis that lost its data lost the key with it, so the pass that follows checks."""
    return _take(CHECK_LOCK_KEY, seconds=settings.PAPERLANE_SWEEP_INTERVAL_SECONDS)


def _take_the_housekeeping() -> bool:
    """Whether this sweeper is the one to do the housekeeping this interval (a Redis that
    does not answer says yes: the housekeeping needs only the storage and the database)."""
    return _take(HOUSEKEEPING_LOCK_KEY, seconds=HOUSEKEEPING_INTERVAL_SECONDS)


def _take(key: str, *, seconds: float) -> bool:
    hold = max(int(seconds * CHECK_LOCK_SHARE * 1000), 1)
    try:
        return bool(redis_connection().set(key, b"1", nx=True, px=hold))
    except RedisError:
        return True


def _abandon_expired_leases() -> int:
    expired = (
        ImportRun.objects.filter(status__in=ACTIVE_STATUSES, lease_expires_at__lt=timezone.now())
        .exclude(lease_owner="")
        .order_by("lease_expires_at", "id")
        .values_list("id", flat=True)[:REPAIRS_PER_PASS]
    )
    return sum(1 for run_id in expired if run_abandon_expired(run_id=run_id) is not None)


def _redeliver_lost_jobs() -> int:
    now = timezone.now()
    # Leave a moment for the accept path and callbacks to enqueue on their own.
    settled_before = now - timedelta(seconds=2)
    stale_before = now - timedelta(seconds=settings.PAPERLANE_REDELIVER_AFTER_SECONDS)
    stranded_before = now - timedelta(seconds=dispatch.STRANDED_AFTER_SECONDS)
    runs = list(
        ImportRun.objects.filter(
            status__in=ACTIVE_STATUSES, lease_owner="", updated_at__lt=settled_before
        )
        .order_by("updated_at", "id")
        .only(*DISPATCH_FIELDS)[:DELIVERIES_CHECKED_PER_PASS]
    )
    connection = redis_connection()
    return sum(
        _redeliver_batch(
            connection, runs[offset : offset + REDIS_BATCH], stale_before, stranded_before
        )
        for offset in range(0, len(runs), REDIS_BATCH)
    )


def _redeliver_batch(
    connection: Redis, runs: list[ImportRun], stale_before: datetime, stranded_before: datetime
) -> int:
    job_ids = [current_job_id(run) for run in runs]
    hashes = broker.jobs_read(connection, job_ids)
    # LPOS walks the list, so only jobs queued longer than STRANDED_AFTER_SECONDS
    # are looked for: in a healthy system none, in a backlog the oldest, which LPOS finds
    # near the head. A worker killed between taking a job off its lanes and starting it
    # leaves one: a host lost, a worker killed under load; found within seconds, not minutes.
    long_queued = [
        (job_id, job.origin)
        for job_id, job in zip(job_ids, hashes, strict=True)
        if job.status == "queued"
        and job.origin
        and job.enqueued_at
        and job.enqueued_at < stranded_before
    ]
    stranded = broker.jobs_in_no_list(
        connection,
        long_queued,
        served=is_served_queue,
        # A sweep interval after a pass first saw it half taken.
        first_seen_for=timedelta(seconds=max(settings.PAPERLANE_SWEEP_INTERVAL_SECONDS, 1.0)),
    )
    redelivered = 0
    for run, job_id, job in zip(runs, job_ids, hashes, strict=True):
        if job.status == "scheduled" and run.due_at and run.due_at < stale_before:
            # A retry whose time passed long ago: the scheduler is not running,
            # so deliver it straight to its queue instead of scheduling it again.
            broker.job_delete(connection, job_id)
            run.due_at = None
        elif job_id in stranded:
            # Marked queued but in no list a worker reads, or left half taken by a
            # worker that died: nothing would ever run it.
            broker.job_delete(connection, job_id)
        elif job.status in WAITING_STATUSES:
            continue
        elif job.status != "missing":
            # The job ran or started without moving the run on (a worker
            # died before claiming): only redeliver once it is clearly stale.
            stamp = job.started_at or job.enqueued_at
            if stamp and stamp > stale_before:
                continue
            broker.job_delete(connection, job_id)
        if enqueue_current(run):
            redelivered += 1
    return redelivered


def _release_ended_reservations() -> int:
    stuck = (
        ImportRun.objects.filter(
            status__in=[s for s in TERMINAL_STATUSES if s != RunStatus.SUCCEEDED],
            reservation__status=QuotaReservation.Status.HELD,
        )
        .select_related("reservation")
        .order_by("updated_at", "id")[:REPAIRS_PER_PASS]
    )
    return sum(1 for run in stuck if quota_release(reservation=run.reservation))


def _remove_orphaned_files() -> int:
    grace = timedelta(seconds=ORPHAN_GRACE_SECONDS)
    redis = redis_connection()
    try:
        after = (redis.get(ORPHANS_RESUME_KEY) or b"").decode()
    except RedisError:
        after = ""  # from the first key, as after a loss of Redis's data
    done = stored_orphans_remove(
        older_than=timezone.now() - grace,
        limit=ORPHANS_PER_PASS,
        examine=ORPHAN_KEYS_PER_PASS,
        after=after,
    )
    try:
        redis.set(ORPHANS_RESUME_KEY, done.resume_after.encode())
    except RedisError:
        logger.warning("could not keep where the orphan walk stopped; it starts over next time")
    return done.removed
