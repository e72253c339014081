"""The connectors loop (`connectors --loop`, a child of `run_workers`): sync every
connection that is due or was asked to sync, and keep providers' upkeep going.

Any number of these loops may run on any number of hosts: each sync takes its
connection with a conditional UPDATE (`connection_claim_sync`), so one
connection is synced by one of them at a time.
"""

import logging

from django.db.models import F, Q
from django.utils import timezone

from connectors.base import NeedsReconnect
from connectors.models import Connection, ConnectorImport
from connectors.problems import problem_text
from connectors.registry import provider_for
from connectors.sync import (
    SYNCING,
    connection_due_q,
    connection_refresh_imports,
    connection_sync,
    sync_owner_name,
)

logger = logging.getLogger(__name__)

# Connections taken per pass; the rest are next.
BATCH = 50


def connections_due() -> list[int]:
    now = timezone.now()
    due = (
        Connection.objects.filter(status__in=SYNCING)
        .filter(connection_due_q(now))
        .filter(Q(sync_lease_until__isnull=True) | Q(sync_lease_until__lt=now))
        .order_by(F("next_sync_at").asc(nulls_first=True), "id")
    )
    return list(due.values_list("id", flat=True)[:BATCH])


def connectors_sync_due(*, owner: str | None = None) -> int:
    """Sync each due connection this loop can take; returns how many it synced."""
    owner = owner or sync_owner_name()
    synced = 0
    for connection_id in connections_due():
        outcome = connection_sync(
            connection=Connection(id=connection_id), owner=owner, only_due=True
        )
        synced += outcome is not None
    return synced


def connectors_maintain() -> None:
    """Each provider's upkeep (tokens, subscriptions) for connections that may sync, and
    imports' states brought in line with their runs."""
    # Upkeep never needs the cursor (a local folder's is JSON of every file).
    idle = [Connection.Status.NEEDS_RECONNECT, Connection.Status.DISCONNECTED]
    keeping = Connection.objects.exclude(status__in=idle).defer("cursor")
    for connection in keeping:
        try:
            provider_for(connection).maintain(connection)
        except NeedsReconnect as exc:
            # Unless it was disconnected meanwhile (its tokens deleted: hence the refusal).
            plain = problem_text(exc.kind, provider=connection.get_provider_display())
            Connection.objects.filter(id=connection.id).exclude(status__in=idle).update(
                status=Connection.Status.NEEDS_RECONNECT,
                status_reason=plain,
                last_error=exc.message,
                last_problem=exc.kind,
            )
        except Exception:  # one connection's trouble must not stop the others' upkeep
            logger.exception("connection %s: upkeep failed", connection.id)
    following = ConnectorImport.objects.filter(state=ConnectorImport.State.QUEUED)
    followed = Connection.objects.filter(id__in=following.values("connection_id")).only("id")
    for connection in followed:
        connection_refresh_imports(connection=connection)
