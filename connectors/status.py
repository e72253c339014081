"""Every change of a connection's status, who made it and why: one table, one action.

`MOVES` is the table of what may become of a connection. Each move names the statuses
it leaves from, the status it leads to and the action its history row records.
`connection_move` is the one way a connection's status changes: it checks the move
against the table (a disallowed move raises DisallowedConnectionMove, a 409), sets the
status and its reason, saves them with the fields its caller changed alongside, and
writes the history row (connectors/history.py) in the caller's transaction.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from connectors.history import connection_event_record
from connectors.models import Connection, ConnectionEvent
from core.errors import Conflict
from pipeline.services.transitions import Actor
from webhooks.dispatch import event_publish
from webhooks.models import EventType

Status = Connection.Status
Action = ConnectionEvent.Action


@dataclass(frozen=True)
class Move:
    name: str
    # The statuses a connection may be in to make it ("" for one being made).
    leaves: frozenset[str]
    to: str
    # What its history row says was done.
    action: str


def _move(name: str, leaves: Iterable[str], to: str, action: str) -> Move:
    return Move(name, frozenset(leaves), to, action)


# Statuses that sync by themselves (an errored connection keeps trying until it pauses).
SYNCING = (Status.ACTIVE, Status.ERROR)
# Every status but disconnected: a connection that still has its sign-in or its folder.
CONNECTED = (*SYNCING, Status.PAUSED, Status.NEEDS_RECONNECT)

# Every move a connection can make. Nothing else changes a connection's status.
MOVES: dict[str, Move] = {
    move.name: move
    for move in (
        # A person or an operator connects a folder: it syncs at once.
        _move("connect", {""}, Status.ACTIVE, Action.CONNECTED),
        # Connected again: a OneDrive folder with new tokens whatever its status, or a
        # disconnected folder brought back.
        _move("reconnect", {*CONNECTED, Status.DISCONNECTED}, Status.ACTIVE, Action.RECONNECTED),
        # A person, an operator, or the system when whoever connected it leaves.
        _move(
            "pause",
            {Status.ACTIVE, Status.ERROR, Status.NEEDS_RECONNECT},
            Status.PAUSED,
            Action.PAUSED,
        ),
        # Needs reconnect and disconnected take a new sign-in instead (reconnect).
        _move("resume", {Status.PAUSED, Status.ERROR}, Status.ACTIVE, Action.RESUMED),
        _move("disconnect", CONNECTED, Status.DISCONNECTED, Action.DISCONNECTED),
        # What a sync (or the upkeep) met: a success after errors, an error (again, for
        # an errored one), too many errors or a folder this server refuses, revoked access.
        _move("recover", {Status.ERROR}, Status.ACTIVE, Action.SYNC),
        _move("fail", SYNCING, Status.ERROR, Action.SYNC),
        _move("give_up", SYNCING, Status.PAUSED, Action.SYNC),
        _move("lose_access", SYNCING, Status.NEEDS_RECONNECT, Action.SYNC),
    )
}


class DisallowedConnectionMove(Conflict):
    code = "transition_not_allowed"


def connection_move(
    *,
    connection: Connection,
    move: str,
    actor: Actor,
    reason: str = "",
    history_reason: str | None = None,
    also_save: Iterable[str] = (),
) -> ConnectionEvent | None:
    """Make `move` on `connection` (its row locked by the caller, or not saved yet for
    `connect`): its status becomes the move's with `reason`, saved with the `also_save`
    fields the caller changed, and the history row says who did it and why
    (`history_reason`, when the row's differs from the status's). The row written, or
    None for a sync's move that leaves the status as it was (an errored connection
    failing again: the history is of changes, not of every sync). DisallowedConnectionMove,
    and nothing changes, if the table has no such move from the connection's status."""
    rule = MOVES[move]
    made = connection._state.adding
    before = "" if made else connection.status
    if before not in rule.leaves:
        shown = Status(before).label.lower() if before else "new"
        raise DisallowedConnectionMove(
            f"A {shown} connection cannot {move.replace('_', ' ')}.",
        )
    connection.status, connection.status_reason = rule.to, reason
    if made:
        connection.save(force_insert=True)
    else:
        fields = [*also_save, "status", "status_reason", "updated_at"]
        connection.save(update_fields=list(dict.fromkeys(fields)))
    if rule.action == Action.SYNC and before == rule.to:
        return None
    if rule.to == Status.PAUSED and before != Status.PAUSED:
        # Integrations that subscribed are told, in this transaction (the outbox).
        event_publish(
            organisation_id=connection.organisation_id,
            type=EventType.CONNECTION_PAUSED,
            data={
                "connection_id": connection.id,
                "provider": connection.provider,
                "folder": connection.folder_path,
                "reason": reason,
                "by": actor.label,
            },
        )
    return connection_event_record(
        connection=connection,
        actor=actor,
        action=rule.action,
        status_before=before,
        reason=reason if history_reason is None else history_reason,
    )
