"""API: the organisation's webhook endpoints and their deliveries (admins' tokens). Thin
callers of webhooks/services.py and webhooks/selectors.py."""

import uuid

from ninja import Path, Router, Status

from api.errors import errors
from api.params import PAGE_LIMIT, PAGE_OFFSET
from api.responses import no_content
from api.schemas import (
    WebhookDeliveryOut,
    WebhookDeliveryPage,
    WebhookEndpointChange,
    WebhookEndpointIn,
    WebhookEndpointOut,
    WebhookEndpointPage,
    WebhookEndpointWithSecret,
)
from documents.roles import Ability, ability_require
from pipeline.services.transitions import Actor
from webhooks.events import event_id_text
from webhooks.models import WebhookDelivery, WebhookEndpoint
from webhooks.selectors import delivery_get, delivery_last_tries, delivery_list, endpoint_get
from webhooks.selectors import endpoint_list as endpoints_of
from webhooks.services import (
    delivery_send_again,
    endpoint_create,
    endpoint_delete,
    endpoint_secret_rotate,
    endpoint_test_send,
    endpoint_update,
)

router = Router(tags=["webhooks"])

ENDPOINT_ID = Path(..., description="The endpoint's id.")
DELIVERY_ID = Path(..., description="The delivery's id.")


def _actor(request) -> Actor:
    return Actor.of(api_token=request.api_token)


def _endpoint(request, endpoint_id: uuid.UUID) -> WebhookEndpoint:
    # Another organisation's endpoint is a 404 before any role is asked about.
    endpoint = endpoint_get(organisation=request.organisation, endpoint_id=endpoint_id)
    ability_require(
        organisation_id=request.organisation.id,
        ability=Ability.WEBHOOKS,
        api_token=request.api_token,
    )
    return endpoint


def _endpoint_out(endpoint: WebhookEndpoint) -> dict:
    return {
        "id": endpoint.id,
        "url": endpoint.url,
        "events": endpoint.events,
        "description": endpoint.description,
        "enabled": endpoint.enabled,
        "disabled_reason": endpoint.disabled_reason,
        "failing_since": endpoint.failing_since,
        "previous_secret_until": endpoint.previous_secret_until,
        "created_at": endpoint.created_at,
    }


def _delivery_out(delivery: WebhookDelivery, last=None) -> dict:
    return {
        "id": delivery.id,
        "event_id": event_id_text(delivery.event_id),
        "event_type": delivery.event.type,
        "status": delivery.status,
        "attempts": delivery.attempts,
        "next_attempt_at": delivery.next_attempt_at,
        "delivered_at": delivery.delivered_at,
        "last_status_code": delivery.last_status_code,
        "last_error": delivery.last_error,
        "last_response_excerpt": last.response_excerpt if last is not None else "",
        "created_at": delivery.created_at,
    }


@router.get(
    "/webhooks",
    response={200: WebhookEndpointPage, **errors(403, 422)},
    url_name="webhook_list",
    operation_id="webhooks_list",
    summary="List the organisation's webhook endpoints",
)
def webhooks_list(request, limit: int = PAGE_LIMIT, offset: int = PAGE_OFFSET):
    """The organisation's endpoints, newest first. Takes an admin's token."""
    ability_require(
        organisation_id=request.organisation.id,
        ability=Ability.WEBHOOKS,
        api_token=request.api_token,
    )
    endpoints = endpoints_of(organisation=request.organisation)
    return {
        "items": [_endpoint_out(e) for e in endpoints[offset : offset + limit]],
        "count": endpoints.count(),
        "limit": limit,
        "offset": offset,
    }


@router.post(
    "/webhooks",
    response={201: WebhookEndpointWithSecret, **errors(403, 409, 422)},
    url_name="webhook_create",
    operation_id="webhooks_create",
    summary="Add a webhook endpoint",
)
def webhooks_create(request, payload: WebhookEndpointIn):
    """A new endpoint, enabled, told of the `events` chosen; its signing secret is in this
    answer and never shown again. `https://` only, unless the operator allows networks
    of their own (then plain `http://` to those). `409` past the organisation's number of
    endpoints. Takes an admin's token."""
    endpoint, secret = endpoint_create(
        organisation=request.organisation,
        url=payload.url,
        events=[str(e) for e in payload.events],
        description=payload.description,
        actor=_actor(request),
    )
    return Status(201, {**_endpoint_out(endpoint), "secret": secret})


@router.get(
    "/webhooks/{endpoint_id}",
    response={200: WebhookEndpointOut, **errors(403, 404, 422)},
    url_name="webhook_get",
    operation_id="webhooks_get",
    summary="A webhook endpoint",
)
def webhooks_get(request, endpoint_id: uuid.UUID = ENDPOINT_ID):
    return _endpoint_out(_endpoint(request, endpoint_id))


@router.patch(
    "/webhooks/{endpoint_id}",
    response={200: WebhookEndpointOut, **errors(403, 404, 422)},
    url_name="webhook_update",
    operation_id="webhooks_update",
    summary="Change a webhook endpoint",
)
def webhooks_update(
    request, endpoint_id: uuid.UUID = ENDPOINT_ID, payload: WebhookEndpointChange | None = None
):
    """Change its URL, events or description, or disable or enable it. Disabling leaves
    its pending deliveries unsent; enabling forgets its failures."""
    endpoint = _endpoint(request, endpoint_id)
    payload = payload or WebhookEndpointChange()
    endpoint = endpoint_update(
        endpoint=endpoint,
        actor=_actor(request),
        url=payload.url,
        events=[str(e) for e in payload.events] if payload.events is not None else None,
        description=payload.description,
        enabled=payload.enabled,
    )
    return _endpoint_out(endpoint)


@router.delete(
    "/webhooks/{endpoint_id}",
    response={204: None, **errors(403, 404, 422)},
    url_name="webhook_delete",
    operation_id="webhooks_delete",
    summary="Delete a webhook endpoint",
)
def webhooks_delete(request, endpoint_id: uuid.UUID = ENDPOINT_ID):
    """Delete it with its deliveries: nothing more is sent to it."""
    endpoint_delete(endpoint=_endpoint(request, endpoint_id), actor=_actor(request))
    return no_content()


@router.post(
    "/webhooks/{endpoint_id}/rotate-secret",
    response={200: WebhookEndpointWithSecret, **errors(403, 404, 422)},
    url_name="webhook_rotate_secret",
    operation_id="webhooks_rotate_secret",
    summary="Give a webhook endpoint a new signing secret",
)
def webhooks_rotate_secret(request, endpoint_id: uuid.UUID = ENDPOINT_ID):
    """A new secret, in this answer only. Until `previous_secret_until` every try carries
    a signature with each secret, so a receiver can change over meanwhile."""
    endpoint, secret = endpoint_secret_rotate(
        endpoint=_endpoint(request, endpoint_id), actor=_actor(request)
    )
    return {**_endpoint_out(endpoint), "secret": secret}


@router.post(
    "/webhooks/{endpoint_id}/test",
    response={202: WebhookDeliveryOut, **errors(403, 404, 409, 422)},
    url_name="webhook_test",
    operation_id="webhooks_test",
    summary="Send a webhook endpoint a test event",
)
def webhooks_test(request, endpoint_id: uuid.UUID = ENDPOINT_ID):
    """Queue a `webhook.test` event for the endpoint, whatever events it asks for; follow
    it in its deliveries. `409` while the endpoint is disabled."""
    delivery = endpoint_test_send(endpoint=_endpoint(request, endpoint_id), actor=_actor(request))
    return Status(202, _delivery_out(delivery))


@router.get(
    "/webhooks/{endpoint_id}/deliveries",
    response={200: WebhookDeliveryPage, **errors(403, 404, 422)},
    url_name="webhook_deliveries",
    operation_id="webhooks_deliveries",
    summary="A webhook endpoint's deliveries",
)
def webhooks_deliveries(
    request,
    endpoint_id: uuid.UUID = ENDPOINT_ID,
    limit: int = PAGE_LIMIT,
    offset: int = PAGE_OFFSET,
):
    """Its deliveries, newest first, each with its last try's answer."""
    deliveries = delivery_list(endpoint=_endpoint(request, endpoint_id))
    page = list(deliveries[offset : offset + limit])
    last = delivery_last_tries(page)
    return {
        "items": [_delivery_out(d, last.get(d.id)) for d in page],
        "count": deliveries.count(),
        "limit": limit,
        "offset": offset,
    }


@router.post(
    "/webhooks/{endpoint_id}/deliveries/{delivery_id}/send-again",
    response={202: WebhookDeliveryOut, **errors(403, 404, 409, 422)},
    url_name="webhook_delivery_send_again",
    operation_id="webhooks_delivery_send_again",
    summary="Send a delivery again",
)
def webhooks_delivery_send_again(
    request, endpoint_id: uuid.UUID = ENDPOINT_ID, delivery_id: uuid.UUID = DELIVERY_ID
):
    """Send the same event (the same `webhook-id`) to the endpoint again now, once,
    whatever became of it. `409` while the endpoint is disabled."""
    delivery = delivery_get(endpoint=_endpoint(request, endpoint_id), delivery_id=delivery_id)
    delivery = delivery_send_again(delivery=delivery, actor=_actor(request))
    return Status(202, _delivery_out(delivery, delivery_last_tries([delivery]).get(delivery.id)))
