"""Reading webhook endpoints and their deliveries, an organisation's own only."""

import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.db.models import Count, Min, Q, QuerySet

from core.errors import NotFound
from documents.models import Organisation
from webhooks.models import DeliveryAttempt, DeliveryStatus, WebhookDelivery, WebhookEndpoint


def endpoint_list(*, organisation: Organisation) -> QuerySet[WebhookEndpoint]:
    """The organisation's endpoints, newest first."""
    return WebhookEndpoint.objects.filter(organisation=organisation).order_by("-created_at", "id")


def endpoint_get(*, organisation: Organisation, endpoint_id: uuid.UUID) -> WebhookEndpoint:
    """The organisation's endpoint; NotFound for another's or an unknown one."""
    try:
        return WebhookEndpoint.objects.select_related("organisation").get(
            organisation=organisation, id=endpoint_id
        )
    except WebhookEndpoint.DoesNotExist:
        raise NotFound("Webhook endpoint not found.") from None


def delivery_list(*, endpoint: WebhookEndpoint) -> QuerySet[WebhookDelivery]:
    """The endpoint's deliveries, newest first, with their event."""
    return (
        WebhookDelivery.objects.filter(endpoint=endpoint)
        .select_related("event")
        .order_by("-created_at", "id")
    )


def delivery_get(*, endpoint: WebhookEndpoint, delivery_id: uuid.UUID) -> WebhookDelivery:
    try:
        return WebhookDelivery.objects.select_related("event", "endpoint").get(
            endpoint=endpoint, id=delivery_id
        )
    except WebhookDelivery.DoesNotExist:
        raise NotFound("Delivery not found.") from None


def delivery_last_tries(deliveries: list[WebhookDelivery]) -> dict[uuid.UUID, DeliveryAttempt]:
    """Each delivery's latest try (one query for a page of them)."""
    tries = (
        DeliveryAttempt.objects.filter(delivery_id__in=[d.id for d in deliveries])
        .order_by("delivery_id", "-number")
        .distinct("delivery_id")
    )
    return {attempt.delivery_id: attempt for attempt in tries}


@dataclass(frozen=True)
class WebhookStats:
    """Deliveries and endpoints, as /metrics and the dashboard show them: each read
    through an index, whatever the tables hold."""

    # Deliveries not yet received with tries left (due now or later).
    pending: int
    # The tries begun in the last hour, by outcome (delivered, failed, interrupted, sending).
    tries_last_hour: dict[str, int]
    # How long the oldest delivery that is due has waited (0 when none is).
    lag_seconds: float
    # Endpoints: enabled, failing (enabled, their last tries failed), disabled.
    endpoints: dict[str, int]


def webhook_stats(*, now) -> WebhookStats:
    pending = WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING).count()
    tries = dict(
        DeliveryAttempt.objects.filter(started_at__gte=now - timedelta(hours=1))
        .values_list("outcome")
        .annotate(n=Count("id"))
        .order_by()
    )
    oldest = WebhookDelivery.objects.filter(
        status=DeliveryStatus.PENDING, next_attempt_at__lte=now
    ).aggregate(oldest=Min("next_attempt_at"))["oldest"]
    counts = WebhookEndpoint.objects.aggregate(
        ok=Count("id", filter=Q(enabled=True, failing_since__isnull=True)),
        failing=Count("id", filter=Q(enabled=True, failing_since__isnull=False)),
        off=Count("id", filter=Q(enabled=False)),
    )
    endpoints = {"enabled": counts["ok"], "failing": counts["failing"], "disabled": counts["off"]}
    return WebhookStats(
        pending=pending,
        tries_last_hour={o: tries.get(o, 0) for o in DeliveryAttempt.Outcome.values},
        lag_seconds=(now - oldest).total_seconds() if oldest else 0.0,
        endpoints=endpoints,
    )
