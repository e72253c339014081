"""Operator actions on runs in the admin: requeue, retry, cancel, dead-letter.

One flow for a run's buttons, a selection in the list and a dead letter group: a
confirmation page says what will happen to how many runs and which are left alone
and why, and asks for a reason; the services then decide again, each under the
run's row lock, and a result page says what they did. The reason goes to the run's
history (RunTransition) and to the admin's log (LogEntry).
"""

from collections.abc import Callable
from dataclasses import dataclass

from django import forms
from django.db.models import QuerySet
from django.utils import timezone
from redis.exceptions import RedisError

from core.errors import ServiceError
from documents.models import QuotaReservation
from pipeline.dispatch import JobState, job_states
from pipeline.models import ACTIVE_STATUSES, RETRYABLE_STATUSES, ImportRun, RunStatus
from pipeline.services.people import (
    RunChange,
    run_cancel,
    run_dead_letter,
    run_requeue,
    run_retry,
)
from pipeline.services.transitions import Actor

# Runs one confirmation may act on: each is its own transaction, in one request.
MAX_RUNS_PER_ACTION = 500


@dataclass(frozen=True)
class Planned:
    run: ImportRun
    will: bool
    note: str


@dataclass(frozen=True)
class Done:
    run: ImportRun
    outcome: str  # "changed", "left alone", "refused"
    note: str


@dataclass(frozen=True)
class RunAction:
    name: str
    label: str  # "Requeue"
    past: str  # "requeued"
    explain: str
    service: Callable[..., RunChange]
    plan: Callable[[list[ImportRun]], list[Planned]]


def _ended_note(run: ImportRun) -> str:
    return f"it has ended ({run.get_status_display().lower()})"


def _plan_requeue(runs: list[ImportRun]) -> list[Planned]:
    waiting = [r for r in runs if r.status in ACTIVE_STATUSES and not r.lease_owner]
    try:
        states = dict(zip([r.id for r in waiting], job_states(waiting), strict=True))
    except RedisError as exc:
        states, unreachable = {}, f"Redis did not answer ({exc}); decided when you confirm"
    else:
        unreachable = ""
    planned = []
    for run in runs:
        state: JobState | None = states.get(run.id)
        if run.status not in ACTIVE_STATUSES:
            planned.append(Planned(run, False, f"{_ended_note(run)}; retry it instead"))
        elif run.lease_owner and run.lease_expires_at and not _expired(run):
            worker = run.lease_owner.partition("@")[2] or "a worker"
            planned.append(Planned(run, False, f"its {run.stage} stage is running on {worker}"))
        elif run.lease_owner:
            planned.append(
                Planned(run, True, "its worker's lease expired: the stage is taken back")
            )
        elif state is None:
            planned.append(Planned(run, True, unreachable))
        elif state.waiting:
            planned.append(Planned(run, False, f"its job is {state.describe()}"))
        else:
            planned.append(Planned(run, True, f"its job is {state.describe()}"))
    return planned


def _expired(run: ImportRun) -> bool:
    return run.lease_expires_at is not None and run.lease_expires_at <= timezone.now()


def _plan_retry(runs: list[ImportRun]) -> list[Planned]:
    # Pages the retries before this one will take, per organisation: a preview; the
    # service decides again under the organisation's conditional UPDATE.
    taken: dict[int, int] = {}
    planned = []
    for run in runs:
        if run.status in ACTIVE_STATUSES:
            planned.append(Planned(run, False, f"it is already in the pipeline ({run.status})"))
            continue
        if run.status not in RETRYABLE_STATUSES:
            planned.append(Planned(run, False, "it succeeded"))
            continue
        reservation = run.reservation
        needs = reservation.pages if reservation.status == QuotaReservation.Status.RELEASED else 0
        left = run.organisation.pages_available - taken.get(run.organisation_id, 0)
        if needs > left:
            planned.append(
                Planned(
                    run,
                    False,
                    f"it needs {needs} pages and {run.organisation.slug} has {left} left",
                )
            )
            continue
        taken[run.organisation_id] = taken.get(run.organisation_id, 0) + needs
        planned.append(Planned(run, True, f"from {run.stage}, holding {needs} pages again"))
    return planned


def _plan_stop(already: str) -> Callable[[list[ImportRun]], list[Planned]]:
    def plan(runs: list[ImportRun]) -> list[Planned]:
        planned = []
        for run in runs:
            if run.status == already:
                planned.append(Planned(run, False, f"it is already {run.get_status_display()}"))
            elif run.status not in ACTIVE_STATUSES:
                planned.append(Planned(run, False, _ended_note(run)))
            else:
                pages = run.reservation.pages
                planned.append(Planned(run, True, f"at {run.stage}; {pages} pages given back"))
        return planned

    return plan


ACTIONS = {
    action.name: action
    for action in (
        RunAction(
            "requeue",
            "Requeue",
            "requeued",
            "Deliver the due stage again where its job is missing from Redis. Runs whose "
            "job is waiting, or whose stage is running under a live lease, are left alone.",
            run_requeue,
            _plan_requeue,
        ),
        RunAction(
            "retry",
            "Retry",
            "retried",
            "Start failed, dead-lettered or cancelled runs again from the stage they "
            "stopped in, holding their pages again; a run whose pages no longer fit is "
            "refused and stays as it is.",
            run_retry,
            _plan_retry,
        ),
        RunAction(
            "cancel",
            "Cancel",
            "cancelled",
            "Stop queued or processing runs and give their pages back.",
            run_cancel,
            _plan_stop(RunStatus.CANCELLED),
        ),
        RunAction(
            "dead_letter",
            "Dead-letter",
            "dead-lettered",
            "Take queued or processing runs out of the pipeline on purpose (a worker "
            "still running one is refused when it next reports) and give their pages back; "
            "they wait in the dead letter list for a retry.",
            run_dead_letter,
            _plan_stop(RunStatus.DEAD_LETTER),
        ),
    )
}


class ReasonForm(forms.Form):
    reason = forms.CharField(
        min_length=3,
        max_length=1000,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 80}),
        help_text="Kept in each run's history and in the admin log.",
    )
    runs = forms.CharField(widget=forms.HiddenInput)

    def run_ids(self) -> list[str]:
        return self.cleaned_data["runs"].split()


def runs_for_action(queryset: QuerySet) -> tuple[list[ImportRun], int]:
    """The runs an action works on (at most MAX_RUNS_PER_ACTION, oldest first) and how
    many were selected in all (counted only up to one more than the bound)."""
    runs = list(
        queryset.select_related("organisation", "reservation", "document").order_by(
            "created_at", "id"
        )[: MAX_RUNS_PER_ACTION + 1]
    )
    return runs[:MAX_RUNS_PER_ACTION], len(runs)


def apply(action: RunAction, runs: list[ImportRun], *, actor: Actor, reason: str) -> list[Done]:
    """Ask the service, run by run; each decides under its own row lock."""
    done = []
    for run in runs:
        try:
            change = action.service(run=run, actor=actor, reason=reason)
        except ServiceError as exc:
            run.refresh_from_db(fields=["status", "stage"])  # as the refusal found it
            done.append(Done(run, "refused", exc.message))
        else:
            outcome = "changed" if change.changed else "left alone"
            done.append(Done(change.run, outcome, change.note))
    return done
