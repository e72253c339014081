"""Run state changes. Every change of a run's status or stage goes through here
and writes a RunTransition row (old, new, who, why) in the same transaction."""

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from jobs.models import ImportRun, RunTransition


def _dispatch_on_commit(run: ImportRun) -> None:
    from jobs.dispatch import stage_enqueue

    run_id, stage, attempt = run.id, run.stage, run.attempts
    transaction.on_commit(lambda: stage_enqueue(run_id=run_id, stage=stage, attempt=attempt))


def run_record_created(*, run: ImportRun, actor: AbstractBaseUser | None, actor_label: str) -> None:
    """Record a new run's first transition and enqueue its first stage after commit."""
    RunTransition.objects.create(
        run=run,
        from_status="",
        to_status=run.status,
        from_stage="",
        to_stage=run.stage,
        actor=actor,
        actor_label=actor_label,
        reason="accepted",
    )
    _dispatch_on_commit(run)
