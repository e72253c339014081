"""Every change of a run's status or stage, who made it and why: one table, one action.

`MOVES` is the table of what may become of a run. Each move names the statuses it
leaves from, the status it leads to and where the stage goes. `run_move` is the one
way a run moves: it checks the move against the table (a disallowed move raises
DisallowedMove, a 409), applies it with the fields its caller changes alongside, writes
the RunTransition (who, when, why), gives back the pages a run held when it ends, and
enqueues what became due once the transaction commits. `run_begin` makes a run (the
table's first move) the same way.

A stage's claim and completion, the moves workers make most, are single statements
(services/stage_sql.py): they take the claim's statuses (`CLAIMED_FROM`, `CLAIMED_TO`)
and the completion's changes (`completion_changes`) from here, checked against the same
table.
"""

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from core.errors import Conflict
from core.text import storable
from documents.models import ApiToken, Document
from documents.roles import Ability, ability_require
from documents.services.content import document_chunks_discard_unsettled
from documents.services.quota import quota_release
from pipeline.dispatch import delivery_of, stage_enqueue
from pipeline.events import run_ended
from pipeline.models import ImportRun, RunStatus, RunTransition, Stage, StageAttempt
from pipeline.stage_list import SOURCE_STAGES, first_stage, next_stage, resume_stage

Status = RunStatus


@dataclass(frozen=True)
class Actor:
    """Who or what changed a run, as the history shows it, and with what right."""

    # "api-token:pl_ab12cd", "user:alice", "worker:host.123.embed", "sweeper".
    label: str
    user: AbstractBaseUser | None = None
    api_token: ApiToken | None = None
    # An operator in the admin: Django's permissions, not an organisation role, govern.
    operator: bool = False

    @classmethod
    def of(
        cls, *, user: AbstractBaseUser | None = None, api_token: ApiToken | None = None
    ) -> "Actor":
        """The person or integration behind a request, acting with their role in the
        organisation of what they act on."""
        if api_token is not None:
            return cls(f"api-token:{api_token.prefix}", api_token=api_token)
        if user is not None:
            return cls(f"user:{user.get_username()}", user)
        return cls("system")

    @classmethod
    def of_operator(cls, user: AbstractBaseUser) -> "Actor":
        """An operator acting in the admin (whose permissions the admin has checked)."""
        return cls(f"user:{user.get_username()}", user, operator=True)

    @classmethod
    def worker(cls, name: str) -> "Actor":
        return cls(f"worker:{name}")

    def require(self, *, organisation_id: int, ability: Ability) -> None:
        """Raise Forbidden unless this actor may do `ability` in the organisation."""
        if self.operator:
            return
        ability_require(
            organisation_id=organisation_id,
            ability=ability,
            user=self.user,
            api_token=self.api_token,
        )


SWEEPER = Actor("sweeper")

# Where a move takes the stage: it stays, the next one of the run's source, the first
# one of its source, the one an ended run resumes at, or a named stage.
SAME, NEXT, FIRST, RESUME = "same", "next", "first", "resume"


@dataclass(frozen=True)
class Move:
    name: str
    # The statuses a run may be in to make it ("" for a run being made).
    leaves: frozenset[str]
    # The status it is in after; None: it stays in the one it was.
    to: str | None
    stage: str = SAME


def _move(name: str, leaves: set[str], to: str | None, stage: str = SAME) -> Move:
    return Move(name, frozenset(leaves), to, stage)


ACTIVE = {Status.QUEUED, Status.PROCESSING}
ENDED_WITHOUT_SUCCESS = {Status.FAILED, Status.DEAD_LETTER, Status.CANCELLED}
ENDED = ENDED_WITHOUT_SUCCESS | {Status.SUCCEEDED}

# Every move a run can make. Nothing else changes a run's status or stage.
MOVES: dict[str, Move] = {
    move.name: move
    for move in (
        # Accepted (an upload) or found (a connected folder's file): due at its first stage.
        _move("begin", {""}, Status.QUEUED, FIRST),
        # A worker takes the due stage; a retry of it is taken while processing.
        _move("claim", ACTIVE, Status.PROCESSING),
        # The stage succeeded: the next one is due, or the run succeeded after its last.
        _move("advance", {Status.PROCESSING}, Status.PROCESSING, NEXT),
        _move("succeed", {Status.PROCESSING}, Status.SUCCEEDED),
        # A transient error with tries left: the stage is due again after a backoff.
        _move("retry_later", {Status.PROCESSING}, Status.PROCESSING),
        # Its worker stopped renewing its lease: the stage is due again now.
        _move("take_back", {Status.PROCESSING}, Status.PROCESSING),
        # An operator delivers a lost job again: nothing changes but the history.
        _move("requeue", ACTIVE, None),
        # Bad input or a refusal: retrying cannot help.
        _move("fail", {Status.PROCESSING}, Status.FAILED),
        # Retries exhausted, poison, or an operator's decision.
        _move("dead_letter", ACTIVE, Status.DEAD_LETTER),
        _move("cancel", ACTIVE, Status.CANCELLED),
        # A person or an operator starts an ended run again from the stage it ended in
        # (from embed if it ended after it: its chunks went when it ended).
        _move("retry", ENDED_WITHOUT_SUCCESS, Status.QUEUED, RESUME),
        # A connected file back at its source after its chunks were taken out of search:
        # they are made again from the text kept (settle then charges nothing new).
        _move("reembed", {Status.SUCCEEDED}, Status.QUEUED, Stage.EMBED),
    )
}


class DisallowedMove(Conflict):
    code = "transition_not_allowed"


def move_check(
    move: str, *, status: str, stage: str, source: str, skip: frozenset[str] = frozenset()
) -> tuple[str, str]:
    """The status and stage a run of `source` in `status` at `stage` is in after `move`
    (the optional stages in `skip` passed over); DisallowedMove if the table has no such
    move from there."""
    rule = MOVES[move]
    if status not in rule.leaves:
        raise DisallowedMove(
            f"A {status or 'new'} run cannot {move.replace('_', ' ')}.",
        )
    if rule.stage == SAME:
        to_stage = stage
    elif rule.stage == FIRST:
        to_stage = first_stage(source)
    elif rule.stage == RESUME:
        to_stage = resume_stage(stage, source=source)
    elif rule.stage == NEXT:
        if stage not in SOURCE_STAGES[source]:
            raise DisallowedMove(f"A {source} run does not go through {stage}.")
        to_stage = next_stage(stage, source=source, skip=skip)
        if to_stage is None:
            raise DisallowedMove(f"{stage} is the last stage of a {source} run.")
    else:
        to_stage = rule.stage
    return (rule.to or status), to_stage


def transition_row(
    run: ImportRun, *, from_status: str, from_stage: str, actor: Actor, reason: str
) -> RunTransition:
    """The history row of a move the run just made (its status and stage are the new ones)."""
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


def deliver_on_commit(run: ImportRun) -> None:
    """Enqueue the stage this transaction made due, once it has committed, within a
    request's budget (if Redis is away the sweeper delivers it)."""
    delivery = delivery_of(run)
    transaction.on_commit(lambda: stage_enqueue(**delivery, in_request=True))


def run_begin(*, actor: Actor, reason: str, **fields: Any) -> tuple[ImportRun, RunTransition]:
    """A new run (of `fields`: organisation, reservation, source, ...) due at its source's
    first stage now, and its first history row, both unsaved: the caller inserts them in
    its transaction, and the stage is enqueued once that commits."""
    status, stage = move_check("begin", status="", stage="", source=fields["source"])
    run = ImportRun(status=status, stage=stage, due_at=timezone.now(), **fields)
    deliver_on_commit(run)
    return run, transition_row(run, from_status="", from_stage="", actor=actor, reason=reason)


def run_move(
    *,
    run: ImportRun,
    move: str,
    actor: Actor,
    reason: str,
    changes: dict[str, Any] | None = None,
    deliver: bool = True,
) -> ImportRun:
    """Make `move` on `run` (locked by the caller, with its reservation loaded), with the
    other fields in `changes`, and write the history row. A run that ends this way
    without success gives its held pages back; one that restarts gets new job ids, a
    whole retry budget and no error. Whatever became due is enqueued after the commit,
    unless `deliver` is False: a stage job's own callback delivers what it returns.
    DisallowedMove (and nothing changes) if the table has no such move from here."""
    from_status, from_stage = run.status, run.stage
    status, stage = move_check(move, status=from_status, stage=from_stage, source=run.source)
    now = timezone.now()
    values: dict[str, Any] = {"status": status, "stage": stage}
    if status in ENDED_WITHOUT_SUCCESS or status == Status.SUCCEEDED:
        values.update(finished_at=now, due_at=None, lease_owner="", lease_expires_at=None)
    elif from_status not in ACTIVE and status == Status.QUEUED:
        values.update(
            finished_at=None,
            due_at=now,
            stage_attempts=0,
            provider_waits=0,
            crashes=0,
            generation=run.generation + 1,
            error_code="",
            error_message="",
            progress_done=0,
            progress_total=0,
        )
    values.update(changes or {})
    if (status, stage) != (from_status, from_stage):
        values["stage_entered_at"] = now
    for field, value in values.items():
        setattr(run, field, value)
    run.save(update_fields=[*values, "updated_at"])
    transition_row(
        run, from_status=from_status, from_stage=from_stage, actor=actor, reason=reason
    ).save(force_insert=True)
    if status in ENDED_WITHOUT_SUCCESS:
        quota_release(reservation=run.reservation)
        _discard_unsettled_chunks(run)
    elif deliver and status in ACTIVE and not run.lease_owner:
        deliver_on_commit(run)
    if status != from_status and status in ENDED:
        run_ended(run)
    return run


def _discard_unsettled_chunks(run: ImportRun) -> None:
    # Chunks become searchable only when a run settles; those this run wrote never will,
    # so they go with its end (the searchable version's stay). Another run of the document
    # still in the pipeline may be writing them: its own end or settle decides instead.
    if run.document_id is None:
        return
    # The document's row, after the run's (the order deletion and completion take): of two
    # runs of it ending at once, the second waits here and then sees the first ended.
    Document.objects.select_for_update(no_key=True).filter(id=run.document_id).exists()
    others = ImportRun.objects.filter(document_id=run.document_id, status__in=ACTIVE).exclude(
        id=run.id
    )
    if not others.exists():
        document_chunks_discard_unsettled(document_id=run.document_id)


# --- The claim and the completion (services/stage_sql.py writes them) --------------------

# The statuses a due stage is claimed from, and the one it is in once claimed.
CLAIMED_FROM = MOVES["claim"].leaves
CLAIMED_TO = MOVES["claim"].to


def completion_changes(
    run: ImportRun, *, now, skip: frozenset[str] = frozenset()
) -> tuple[str, dict[str, Any]]:
    """The move that completing the run's claimed stage makes (`advance`, or `succeed`
    after its source's last stage; the optional stages in `skip` passed over) and the
    fields it writes."""
    following = next_stage(run.stage, source=run.source, skip=skip)
    move = "advance" if following is not None else "succeed"
    status, stage = move_check(
        move, status=Status.PROCESSING, stage=run.stage, source=run.source, skip=skip
    )
    changes = {
        "status": status,
        "lease_owner": "",
        "lease_expires_at": None,
        "stage_attempts": 0,
        "provider_waits": 0,
        "crashes": 0,
        "error_code": "",
        "error_message": "",
        "updated_at": now,
        # The stage (or, at the end, the status) changes.
        "stage_entered_at": now,
    }
    if move == "succeed":
        changes.update(finished_at=now, due_at=None)
    else:
        changes.update(stage=stage, due_at=now, progress_done=0, progress_total=0)
    return move, changes


# What a succeeded attempt writes, beside its end and CPU.
ATTEMPT_SUCCEEDED = {
    "outcome": StageAttempt.Outcome.SUCCEEDED,
    "error_code": "",
    "error_type": "",
    "error_message": "",
    "traceback": "",
}


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
