"""What the sweeper does to a run: take back a stage whose worker stopped renewing its hold,
and close the attempts no worker is left to close."""

import uuid
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from pipeline import lease
from pipeline.fair_share import heavy_entry_release
from pipeline.models import ImportRun, RunStatus, StageAttempt
from pipeline.services.transitions import SWEEPER, Actor, attempt_finish, run_move
from pipeline.stage_list import STAGES

Outcome = StageAttempt.Outcome


@transaction.atomic
def run_abandon_expired(*, run_id: uuid.UUID) -> ImportRun | None:
    """A worker stopped renewing its hold: record the crash, then retry or dead letter."""
    run = (
        ImportRun.objects.select_for_update(skip_locked=True)
        .select_related("reservation")
        .filter(id=run_id, lease_expires_at__lt=timezone.now())
        .exclude(lease_owner="")
        .first()
    )
    if run is None:
        return None
    run_take_back_locked(run=run, actor=SWEEPER)
    return run


def runs_take_back_from_dead_worker(*, worker: str, why: str, actor: Actor) -> int:
    """Take back at once every stage held by a worker process that has exited (its
    supervisor saw it go), instead of waiting for the leases to expire. `worker` is
    the process's name up to its pid, `host.pid.`. Safe even if something of it still
    ran: every write a stage makes is guarded by its lease owner. Returns how many."""
    held = f"@{worker}"
    run_ids = list(
        ImportRun.objects.filter(status=RunStatus.PROCESSING, lease_owner__contains=held)
        .order_by("id")
        .values_list("id", flat=True)[:100]
    )
    taken = 0
    for run_id in run_ids:
        with transaction.atomic():
            run = (
                ImportRun.objects.select_for_update()
                .select_related("reservation")
                .filter(id=run_id, lease_owner__contains=held)
                .first()
            )
            if run is not None:
                run_take_back_locked(run=run, actor=actor, note=f" ({why})")
                taken += 1
    return taken


def run_take_back_locked(*, run: ImportRun, actor: Actor, note: str = "") -> None:
    """Take back the stage of a run whose lease expired (the caller holds the row lock):
    its running attempt is abandoned, the crash counted, and the stage is due again now,
    or the run is dead-lettered as poison after PAPERLANE_POISON_CRASHES in a row."""
    job_id, _, worker = run.lease_owner.partition("@")
    message = f"worker {worker or 'unknown'} stopped responding during {run.stage}"
    for attempt in StageAttempt.objects.filter(
        run=run, stage=run.stage, job_id=job_id, outcome=Outcome.RUNNING
    ):
        attempt_finish(attempt, Outcome.ABANDONED, code="worker_lost", message=message)
    crashes = run.crashes + 1
    changes = {"crashes": crashes, "lease_owner": "", "lease_expires_at": None}
    if crashes >= settings.PAPERLANE_POISON_CRASHES:
        move = "dead_letter"
        changes["error_code"] = "poison"
        changes["error_message"] = reason = (
            f"The {run.stage} stage stopped its worker {crashes} times in a row; "
            "an operator needs to look at this document."
        )
    else:
        move = "take_back"
        changes["due_at"] = timezone.now()
        changes["error_code"] = "worker_lost"
        changes["error_message"] = (
            f"The {run.stage} step was interrupted; it is resuming elsewhere."
        )
        reason = f"{message}; resuming elsewhere"
    run_move(run=run, move=move, actor=actor, reason=f"{reason}{note}", changes=changes)
    # The dead worker's place among its organisation's heavy jobs (pipeline/fair_share.py).
    stage, organisation_id = run.stage, run.organisation_id
    transaction.on_commit(
        lambda: heavy_entry_release(stage=stage, organisation_id=organisation_id, entry=job_id)
    )


def attempts_abandon_unreported(*, limit: int) -> int:
    """Close as abandoned the running attempts no worker can still be at: started longer
    ago than their stage's timeout, the hung margin and a lease (by then the lease keeper
    has stopped a worker that was still in the stage). These are the attempts of runs
    that ended while their worker was at it (a cancel leaves the attempt to the worker to
    close) and whose worker then died before it could. Returns how many, at most `limit`
    per stage."""
    now = timezone.now()
    closed = 0
    for spec in STAGES:
        past = spec.timeout + lease.HUNG_MARGIN_SECONDS
        past += settings.PAPERLANE_LEASE_SECONDS
        unreported = list(
            StageAttempt.objects.filter(
                outcome=Outcome.RUNNING,
                stage=spec.name,
                started_at__lt=now - timedelta(seconds=past),
            )
            .order_by("started_at", "id")
            .values_list("id", flat=True)[:limit]
        )
        closed += StageAttempt.objects.filter(id__in=unreported, outcome=Outcome.RUNNING).update(
            outcome=Outcome.ABANDONED,
            finished_at=now,
            error_code="worker_lost",
            error_message=(
                f"Its worker never said how this attempt ended; after {past} s it can no "
                "longer have been running it."
            ),
        )
    return closed
