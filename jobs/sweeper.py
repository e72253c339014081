"""The sweeper: the database is the truth, so repair whatever Redis lost.

One pass:
1. runs whose worker stopped renewing its lease: record the crash, then
   resume the stage elsewhere (or dead-letter a poison run);
2. runs with a stage due (or a retry scheduled) but no job waiting in Redis
   (Redis flushed, a callback that never ran, an enqueue that failed at
   accept, a job stuck with a dead worker): enqueue it again;
3. ended runs that still hold pages: release them.
"""

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from rq.job import Job
from rq.utils import utcparse

from documents.models import QuotaReservation
from documents.services.quota import quota_release
from jobs.dispatch import DISPATCH_FIELDS, current_job_id, enqueue_current
from jobs.models import ACTIVE_STATUSES, TERMINAL_STATUSES, ImportRun, RunStatus
from jobs.queues import redis_connection
from jobs.services.sweeper import run_abandon_expired

logger = logging.getLogger(__name__)

BATCH = 500
WAITING = {b"queued", b"scheduled", b"deferred"}


@dataclass
class SweepReport:
    abandoned: int = 0
    redelivered: int = 0
    released: int = 0

    def __str__(self) -> str:
        return (
            f"abandoned {self.abandoned}, redelivered {self.redelivered}, released {self.released}"
        )


def sweep_once() -> SweepReport:
    report = SweepReport()
    report.abandoned = _abandon_expired_leases()
    report.redelivered = _redeliver_lost_jobs()
    report.released = _release_ended_reservations()
    if report.abandoned or report.redelivered or report.released:
        logger.info("sweep: %s", report)
    return report


def _abandon_expired_leases() -> int:
    expired = (
        ImportRun.objects.filter(status__in=ACTIVE_STATUSES, lease_expires_at__lt=timezone.now())
        .exclude(lease_owner="")
        .values_list("id", flat=True)[:BATCH]
    )
    return sum(1 for run_id in expired if run_abandon_expired(run_id=run_id) is not None)


def _redeliver_lost_jobs() -> int:
    now = timezone.now()
    # Leave a moment for the accept path and callbacks to enqueue on their own.
    settled_before = now - timedelta(seconds=2)
    stale_before = now - timedelta(seconds=settings.PAPERLANE_REDELIVER_AFTER_SECONDS)
    runs = list(
        ImportRun.objects.filter(
            status__in=ACTIVE_STATUSES, lease_owner="", updated_at__lt=settled_before
        ).only(*DISPATCH_FIELDS)[: BATCH * 20]
    )
    connection = redis_connection()
    redelivered = 0
    for offset in range(0, len(runs), BATCH):
        batch = runs[offset : offset + BATCH]
        job_ids = [current_job_id(run) for run in batch]
        with connection.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.hmget(f"rq:job:{job_id}", "status", "enqueued_at", "started_at")
            states = pipe.execute()
        for run, job_id, (status, enqueued, started) in zip(batch, job_ids, states, strict=True):
            if status == b"scheduled" and run.due_at and run.due_at < stale_before:
                # A retry whose time passed long ago: the scheduler is not running,
                # so deliver it straight to its queue instead of scheduling it again.
                Job(job_id, connection=connection).delete(remove_from_queue=True)
                run.due_at = None
            elif status in WAITING:
                continue
            elif status is not None:
                # The job ran or started without moving the run on (a worker
                # died before claiming): only redeliver once it is clearly stale.
                stamp = started or enqueued
                if stamp and _parse_rq_time(stamp) > stale_before:
                    continue
                Job(job_id, connection=connection).delete(remove_from_queue=True)
            if enqueue_current(run):
                redelivered += 1
    return redelivered


def _parse_rq_time(value: bytes):
    return utcparse(value.decode())


def _release_ended_reservations() -> int:
    stuck = ImportRun.objects.filter(
        status__in=[s for s in TERMINAL_STATUSES if s != RunStatus.SUCCEEDED],
        reservation__status=QuotaReservation.Status.HELD,
    ).select_related("reservation")[:BATCH]
    return sum(1 for run in stuck if quota_release(reservation=run.reservation))
