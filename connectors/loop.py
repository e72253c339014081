"""The connectors loop (`connectors --loop`, a child of `run_workers`): sync every
connection that is due or was asked to sync, and keep providers' upkeep going.

Any number of these loops may run on any number of hosts: each sync takes its
connection with a conditional UPDATE (`connection_claim_sync`), so one
connection is synced by one of them at a time.
"""

import logging

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from connectors.base import NeedsReconnect
from connectors.models import Connection, ConnectorImport
from connectors.problems import problem_text
from connectors.registry import provider_for
from connectors.services import connection_pause_if_signed_in_by_former_member
from connectors.status import SYNCING, connection_move
from connectors.sync import (
    connection_due_q,
    connection_refresh_imports,
    connection_sync,
    connector_actor,
    sync_owner_name,
)

logger = logging.getLogger(__name__)

# How often the loop looks for due connections (the upkeep's: base.MAINTAIN_SECONDS).
LOOP_SECONDS = 1.0

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
    """Each provider's upkeep (tokens, subscriptions) for connections that sync by
    themselves (active, or erring), and imports' states brought in line with their runs.

    A paused, disconnected or needs-reconnect connection is left alone: its tokens are
    not refreshed nor its subscription renewed (a paused one's resume syncs, and the
    sync refreshes what it needs). A OneDrive one whose sign-in is no longer a member's
    is paused instead: its tokens are not used again."""
    # Upkeep never needs the cursor (a local folder's is JSON of every file).
    keeping = (
        Connection.objects.filter(status__in=SYNCING)
        .select_related("organisation", "created_by")
        .defer("cursor")
    )
    for connection in keeping:
        try:
            if connection_pause_if_signed_in_by_former_member(connection=connection):
                continue
            provider_for(connection).maintain(connection)
        except NeedsReconnect as exc:
            _lose_access(connection, exc)
        except Exception:  # one connection's trouble must not stop the others' upkeep
            logger.exception("connection %s: upkeep failed", connection.id)
    following = ConnectorImport.objects.filter(state=ConnectorImport.State.QUEUED)
    followed = Connection.objects.filter(id__in=following.values("connection_id")).only("id")
    for connection in followed:
        connection_refresh_imports(connection=connection)


def _lose_access(connection: Connection, refusal: NeedsReconnect) -> None:
    """The provider refused the connection's sign-in during upkeep: it needs reconnecting,
    unless it stopped syncing meanwhile (disconnected: its tokens deleted, hence the
    refusal; or paused)."""
    with transaction.atomic():
        row = (
            Connection.objects.select_for_update()
            .defer("cursor")
            .filter(id=connection.id, status__in=SYNCING)
            .first()
        )
        if row is None:
            return
        row.last_error, row.last_problem = refusal.message, refusal.kind
        connection_move(
            connection=row,
            move="lose_access",
            actor=connector_actor(row),
            reason=problem_text(refusal.kind, provider=row.get_provider_display()),
            also_save=("last_error", "last_problem"),
        )
