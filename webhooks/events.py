"""Events written in the transaction of the change they tell of (the outbox).

`event_record` writes, in one statement, the event and a pending delivery for each
enabled endpoint of the organisation that wants its type, and nothing at all when none
does: a change costs one round trip whether or not anyone listens. The endpoints to wake
are woken once the transaction commits (webhooks/dispatch.py).
"""

import json
import uuid
from dataclasses import dataclass

from django.db import connection

from webhooks.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint, WebhookEvent


@dataclass(frozen=True)
class Wake:
    """An endpoint with deliveries due, and its turn (its next worker job's name)."""

    endpoint_id: uuid.UUID
    turn: int


_RECORD = f"""
    WITH targets AS (
        SELECT id, turn FROM {WebhookEndpoint._meta.db_table}
        WHERE organisation_id = %(organisation)s AND enabled AND %(type)s = ANY(events)
    ), event AS (
        INSERT INTO {WebhookEvent._meta.db_table} (id, organisation_id, type, data, created_at)
        SELECT %(event)s, %(organisation)s, %(type)s, %(data)s::jsonb, now()
        WHERE EXISTS (SELECT 1 FROM targets)
        RETURNING id
    )
    INSERT INTO {WebhookDelivery._meta.db_table}
        (id, event_id, endpoint_id, status, attempts, next_attempt_at, last_error, created_at)
    SELECT gen_random_uuid(), event.id, targets.id, %(pending)s, 0, now(), '', now()
    FROM event, targets
    RETURNING endpoint_id, (SELECT turn FROM targets WHERE targets.id = endpoint_id)
"""


def event_record(*, organisation_id: int, type: str, data: dict) -> list[Wake]:
    """Write event `type` with `data` for the organisation's endpoints that want it, in
    the caller's transaction; the endpoints to wake once it commits."""
    with connection.cursor() as cursor:
        cursor.execute(
            _RECORD,
            {
                "organisation": organisation_id,
                "type": type,
                "event": uuid.uuid4(),
                "data": json.dumps(data, sort_keys=True),
                "pending": DeliveryStatus.PENDING,
            },
        )
        return [Wake(endpoint_id, turn) for endpoint_id, turn in cursor.fetchall()]


def event_body(event: WebhookEvent, *, organisation_slug: str) -> bytes:
    """The JSON every try of the event sends: the Standard Webhooks envelope (`type`,
    `timestamp`, `data`) with its id and organisation. The same bytes on every try."""
    envelope = {
        "id": event_id_text(event.id),
        "type": event.type,
        "timestamp": event.created_at.isoformat().replace("+00:00", "Z"),
        "organisation": organisation_slug,
        "data": event.data,
    }
    return json.dumps(envelope, separators=(",", ":"), sort_keys=True).encode()


def event_id_text(event_id: uuid.UUID) -> str:
    """The event's id as integrations see it (`webhook-id`, the body's `id`)."""
    return f"evt_{event_id.hex}"
