"""Reading webhook endpoints and their deliveries, an organisation's own only."""

import uuid

from django.db.models import QuerySet

from core.errors import NotFound
from documents.models import Organisation
from webhooks.models import DeliveryAttempt, WebhookDelivery, WebhookEndpoint


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
