"""Who changes a run, and the one way a change is written: fields, transition, dispatch."""

from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from core.text import storable
from documents.models import ApiToken
from pipeline.dispatch import delivery_of, stage_enqueue
from pipeline.models import ImportRun, RunTransition, StageAttempt


@dataclass(frozen=True)
class Actor:
    """Who or what changed a run, as the history shows it."""

    # "api-token:pl_ab12cd", "user:alice", "worker:host.123.embed", "sweeper".
    label: str
    user: AbstractBaseUser | None = None

    @classmethod
    def of(
        cls, *, user: AbstractBaseUser | None = None, api_token: ApiToken | None = None
    ) -> "Actor":
        """The person or integration behind a request."""
        if api_token is not None:
            return cls(f"api-token:{api_token.prefix}")
        if user is not None:
            return cls(f"user:{user.get_username()}", user)
        return cls("system")

    @classmethod
    def worker(cls, name: str) -> "Actor":
        return cls(f"worker:{name}")


SWEEPER = Actor("sweeper")


def dispatch_on_commit(run: ImportRun) -> None:
    """Enqueue the stage this transaction made due, once it has committed, within a
    request's budget (if Redis is away the sweeper delivers it)."""
    delivery = delivery_of(run)
    transaction.on_commit(lambda: stage_enqueue(**delivery, in_request=True))


def run_transition(
    run: ImportRun, *, from_status: str, from_stage: str, actor: Actor, reason: str
) -> RunTransition:
    """The transition a run just made (its current status and stage are the new ones),
    not yet saved."""
    return RunTransition(
        run=run,
        from_status=from_status,
        to_status=run.status,
        from_stage=from_stage,
        to_stage=run.stage,
        actor=actor.user,
        actor_label=actor.label,
        reason=storable(reason[:2000]),
    )


def run_record(
    run: ImportRun, *, from_status: str, from_stage: str, actor: Actor, reason: str
) -> None:
    """Write the transition a run just made (its current status and stage are the new ones)."""
    run_transition(
        run, from_status=from_status, from_stage=from_stage, actor=actor, reason=reason
    ).save(force_insert=True)


def run_save(
    run: ImportRun,
    fields: list[str],
    *,
    from_status: str,
    actor: Actor,
    reason: str,
    from_stage: str | None = None,
) -> None:
    """Save the changed fields of a run and write the transition they make (from
    `from_stage`, when the stage changed too).

    A change of status restarts the clock of "time in the current stage"."""
    if run.status != from_status:
        run.stage_entered_at = timezone.now()
        fields = [*fields, "stage_entered_at"]
    run.save(update_fields=[*fields, "updated_at"])
    run_record(
        run,
        from_status=from_status,
        from_stage=run.stage if from_stage is None else from_stage,
        actor=actor,
        reason=reason,
    )


def attempt_finish(
    attempt: StageAttempt, outcome: str, *, code: str = "", message: str = "", tb: str = ""
) -> None:
    """Close a stage attempt with its outcome (and error, for operators)."""
    attempt.outcome = outcome
    attempt.finished_at = timezone.now()
    attempt.error_message = storable(message[:10000])
    attempt.traceback = storable(tb[:50000])
    attempt.error_code = code
    fields = [
        "outcome",
        "finished_at",
        "error_code",
        "error_message",
        "error_type",
        "traceback",
        "cpu_ms",
    ]
    attempt.save(update_fields=fields)
