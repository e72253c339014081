"""A connection's history: one row for each change made to it (connectors/models.py,
ConnectionEvent), written by its move (connectors/status.py) in the same transaction."""

from connectors.models import Connection, ConnectionEvent
from pipeline.services.transitions import Actor


def connection_event_record(
    *,
    connection: Connection,
    actor: Actor,
    action: str,
    status_before: str,
    reason: str = "",
) -> ConnectionEvent:
    """Record that `actor` did `action` to `connection`, whose status went from
    `status_before` to the one it has now. The caller holds the row's lock."""
    return ConnectionEvent.objects.create(
        connection=connection,
        actor=actor.label[:200],
        user=actor.user if getattr(actor.user, "pk", None) else None,
        action=action,
        status_before=status_before,
        status_after=connection.status,
        reason=reason,
    )
