"""A worker's turn at one endpoint: its due deliveries, oldest first, one try each.

An endpoint is served by one worker at a time: the turn begins by taking its lease (one
conditional UPDATE; a second job for it finds the lease held and ends at once) and
renews it with each try, so a worker killed in a turn leaves a lease that expires within
three times a try's time (webhooks/limits.py), after which the sweeper wakes the endpoint again and
the delivery that was in flight is sent again (the same event id). A turn lasts at most
twice a try's time, then gives the worker to the next endpoint in the
queue and asks for another turn (webhooks/dispatch.py): one organisation's slow receiver
never holds the others'. A failed try ends the turn: a receiver that is down is asked
again when its deliveries' next tries are due, not once for each of them now.

Each try is recorded before it is sent (a try with no outcome is one a killed worker
began: the next turn closes it as interrupted) and counts against the schedule
(PAPERLANE_WEBHOOK_RETRY_SECONDS, each delay drawn between half of it and all of it);
after the last, the delivery is dead-lettered. A receiver answering 410 Gone disables
its endpoint; one whose tries have all failed for a day
is disabled too, with the reason on the endpoint for its admins.
"""

import logging
import random
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, transaction
from django.db.models import F, Q
from django.utils import timezone

from core.secrets import CredentialsUnreadable, credentials_decrypt
from pipeline.hosts import process_name
from webhooks.events import event_body, event_id_text
from webhooks.limits import DISABLE_AFTER, connect_seconds, lease, try_seconds, turn_seconds
from webhooks.models import (
    DeliveryAttempt,
    DeliveryStatus,
    WebhookDelivery,
    WebhookEndpoint,
)
from webhooks.sending import Answer, networks_parse, webhook_post
from webhooks.signing import signed_headers

logger = logging.getLogger(__name__)

Outcome = DeliveryAttempt.Outcome

UNREADABLE_SECRET = (
    "Its signing secret cannot be read with the server's keys (PAPERLANE_CONNECTOR_KEYS "
    "changed): give it a new secret, then enable it."
)


@dataclass(frozen=True)
class TurnReport:
    endpoint_id: str
    # The endpoint's turn now: the name of the job that serves it next.
    turn: int
    tries: int = 0
    # Deliveries due that this turn left: another turn is asked for at once.
    more: bool = False


def endpoint_turn(endpoint_id: str) -> dict:
    """RQ job: deliver what is due to endpoint `endpoint_id` (webhooks/dispatch.py)."""
    close_old_connections()
    report = _turn(uuid.UUID(endpoint_id), owner=process_name("webhooks"))
    close_old_connections()
    return {"endpoint_id": report.endpoint_id, "turn": report.turn, "more": report.more}


def _turn(endpoint_id: uuid.UUID, *, owner: str) -> TurnReport:
    endpoint = _claim(endpoint_id, owner)
    if endpoint is None:
        return TurnReport(str(endpoint_id), turn=0)
    DeliveryAttempt.objects.filter(
        delivery__endpoint_id=endpoint.id, outcome=Outcome.SENDING
    ).update(outcome=Outcome.INTERRUPTED, finished_at=timezone.now(), error="its worker stopped")
    ends = time.monotonic() + turn_seconds()
    tries, going = 0, True
    try:
        while going and time.monotonic() < ends:
            delivery = _next_due(endpoint)
            if delivery is None:
                break
            answer = _try(endpoint, delivery, owner)
            if answer is None:
                going = False
                break
            tries += 1
            endpoint.refresh_from_db(fields=["enabled", "lease_owner"])
            going = answer.delivered and endpoint.enabled and endpoint.lease_owner == owner
    finally:
        WebhookEndpoint.objects.filter(id=endpoint.id, lease_owner=owner).update(
            lease_owner="", lease_expires_at=None
        )
    # Out of time with more due: another turn now. After a failure: when next due.
    more = going and tries > 0 and _due(endpoint.id).exists()
    return TurnReport(str(endpoint.id), turn=endpoint.turn, tries=tries, more=more)


def _claim(endpoint_id: uuid.UUID, owner: str) -> WebhookEndpoint | None:
    now = timezone.now()
    taken = WebhookEndpoint.objects.filter(
        Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now),
        id=endpoint_id,
        enabled=True,
    ).update(
        lease_owner=owner,
        lease_expires_at=now + lease(),
        turn=F("turn") + 1,
    )
    if not taken:
        return None
    return WebhookEndpoint.objects.select_related("organisation").get(id=endpoint_id)


def _due(endpoint_id):
    return WebhookDelivery.objects.filter(
        endpoint_id=endpoint_id, status=DeliveryStatus.PENDING, next_attempt_at__lte=timezone.now()
    )


def _next_due(endpoint: WebhookEndpoint) -> WebhookDelivery | None:
    return (
        _due(endpoint.id).select_related("event").order_by("next_attempt_at", "created_at").first()
    )


def secrets_in_force(endpoint: WebhookEndpoint) -> list[str]:
    """The secrets a try is signed with: the endpoint's, and the one before the last
    rotation while its overlap lasts. CredentialsUnreadable if the keys changed."""
    secrets = [credentials_decrypt(endpoint.secret)["secret"]]
    until = endpoint.previous_secret_until
    if endpoint.previous_secret and until and until > timezone.now():
        secrets.append(credentials_decrypt(endpoint.previous_secret)["secret"])
    return secrets


def _try(endpoint: WebhookEndpoint, delivery: WebhookDelivery, owner: str) -> Answer | None:
    """One try of `delivery`: begun (recorded, counted, the lease renewed), sent, ended.
    None, and nothing sent, when the endpoint is no longer this worker's or the delivery
    no longer pending (another worker, after this one's lease expired, took over)."""
    with transaction.atomic():
        now = timezone.now()
        held = WebhookEndpoint.objects.filter(id=endpoint.id, lease_owner=owner).update(
            lease_expires_at=now + lease()
        )
        locked = WebhookDelivery.objects.select_for_update().only("status", "attempts")
        current = locked.get(id=delivery.id)
        if not held or current.status != DeliveryStatus.PENDING:
            return None
        delivery.attempts = current.attempts + 1
        delivery.save(update_fields=["attempts"])
        attempt = DeliveryAttempt.objects.create(
            delivery=delivery, number=delivery.attempts, worker=owner, started_at=now
        )
    body = event_body(delivery.event, organisation_slug=endpoint.organisation.slug)
    try:
        secrets = secrets_in_force(endpoint)
    except CredentialsUnreadable:
        answer = Answer(error=UNREADABLE_SECRET)
        delivery_record(delivery=delivery, attempt=attempt, answer=answer, endpoint=endpoint)
        endpoint_disable(endpoint=endpoint, reason=UNREADABLE_SECRET)
        return answer
    headers = signed_headers(
        event_id=event_id_text(delivery.event_id),
        at=timezone.now(),
        body=body,
        secrets_in_force=secrets,
    )
    answer = webhook_post(
        url=endpoint.url,
        body=body,
        headers=headers,
        allowed=networks_parse(settings.PAPERLANE_WEBHOOK_ALLOWED_NETWORKS),
        connect_seconds=connect_seconds(),
        total_seconds=try_seconds(),
    )
    delivery_record(delivery=delivery, attempt=attempt, answer=answer, endpoint=endpoint)
    logger.info(
        "webhook %s to %s: try %s %s",
        event_id_text(delivery.event_id),
        endpoint.id,
        delivery.attempts,
        answer.status_code or answer.error,
    )
    return answer


def retry_delay(*, tries: int, rng: random.Random | None = None) -> float | None:
    """Seconds before the next try after `tries` failed ones; None after the last."""
    schedule = settings.PAPERLANE_WEBHOOK_RETRY_SECONDS
    if tries > len(schedule):
        return None
    step = float(schedule[tries - 1])
    return (rng or random).uniform(step / 2, step)


def _failure_text(answer: Answer) -> str:
    if answer.error:
        return answer.error[:300]
    if 300 <= answer.status_code < 400:
        return f"answered {answer.status_code}: redirects are not followed"
    return f"answered {answer.status_code}"


def delivery_record(
    *, delivery: WebhookDelivery, attempt: DeliveryAttempt, answer: Answer, endpoint
) -> None:
    """End a try with `answer`: the delivery done, due again later, or dead-lettered; the
    endpoint disabled when its receiver is gone or has failed for too long."""
    now = timezone.now()
    attempt.finished_at = now
    attempt.status_code = answer.status_code
    attempt.response_excerpt = answer.excerpt
    with transaction.atomic():
        if answer.delivered:
            attempt.outcome = Outcome.DELIVERED
            attempt.save(
                update_fields=["finished_at", "status_code", "response_excerpt", "outcome"]
            )
            WebhookDelivery.objects.filter(id=delivery.id).update(
                status=DeliveryStatus.SUCCEEDED,
                delivered_at=now,
                next_attempt_at=None,
                last_status_code=answer.status_code,
                last_error="",
            )
            WebhookEndpoint.objects.filter(id=endpoint.id).update(failing_since=None)
            return
        attempt.outcome, attempt.error = Outcome.FAILED, _failure_text(answer)
        attempt.save(
            update_fields=["finished_at", "status_code", "response_excerpt", "outcome", "error"]
        )
        delay = retry_delay(tries=delivery.attempts)
        WebhookDelivery.objects.filter(id=delivery.id).update(
            status=DeliveryStatus.PENDING if delay is not None else DeliveryStatus.DEAD_LETTER,
            next_attempt_at=now + timedelta(seconds=delay) if delay is not None else None,
            last_status_code=answer.status_code,
            last_error=attempt.error,
        )
        endpoint = WebhookEndpoint.objects.select_for_update().get(id=endpoint.id)
        if endpoint.failing_since is None:
            endpoint.failing_since = now
            endpoint.save(update_fields=["failing_since", "updated_at"])
        if answer.status_code == 410:
            endpoint_disable(endpoint=endpoint, reason="Its receiver answered 410 Gone.")
        elif now - endpoint.failing_since >= DISABLE_AFTER:
            since = timezone.localtime(endpoint.failing_since).strftime("%Y-%m-%d %H:%M %Z")
            endpoint_disable(
                endpoint=endpoint,
                reason=f"Every try has failed since {since} (last: {attempt.error}).",
            )


def endpoint_disable(*, endpoint: WebhookEndpoint, reason: str) -> None:
    """Disable `endpoint` (locked by the caller, or alone) with `reason`; the deliveries it
    had pending are not sent (each can be sent again by hand)."""
    endpoint.enabled = False
    endpoint.disabled_reason = reason[:300]
    endpoint.save(update_fields=["enabled", "disabled_reason", "updated_at"])
    WebhookDelivery.objects.filter(endpoint_id=endpoint.id, status=DeliveryStatus.PENDING).update(
        status=DeliveryStatus.SKIPPED, next_attempt_at=None, last_error=reason[:300]
    )
