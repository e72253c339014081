"""Webhook endpoints: made, changed, their secret rotated, deleted; a delivery sent again,
a test event sent. Every one by an admin of the organisation (Ability.WEBHOOKS), through
the API, the members' pages or the operators' admin alike."""

import uuid

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.errors import Conflict, ServiceError
from core.secrets import (
    CredentialsUnreadable,
    ReencryptReport,
    credentials_encrypt,
    credentials_reencrypt,
    credentials_under_newest_key,
)
from documents.models import Organisation
from documents.roles import Ability
from pipeline.services.transitions import Actor
from webhooks.delivery import endpoint_disable
from webhooks.dispatch import endpoints_wake
from webhooks.events import Wake
from webhooks.limits import MAX_ENDPOINTS, SECRET_OVERLAP
from webhooks.models import (
    SUBSCRIBABLE,
    DeliveryStatus,
    EventType,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
)
from webhooks.signing import secret_new

MAX_URL_CHARS = 2000
MAX_DESCRIPTION_CHARS = 200


class InvalidEndpoint(ServiceError):
    code = "invalid_webhook_endpoint"


def _check_url(url: str) -> str:
    url = (url or "").strip()
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0].rsplit("@", 1)[-1]
    if len(url) > MAX_URL_CHARS or scheme.lower() not in ("https", "http") or not host:
        raise InvalidEndpoint(
            f"The URL must be an https:// address of at most {MAX_URL_CHARS} characters."
        )
    if "@" in rest.split("/", 1)[0]:
        raise InvalidEndpoint("The URL must not hold a user name or password.")
    if scheme.lower() == "http" and not settings.PAPERLANE_WEBHOOK_ALLOWED_NETWORKS:
        raise InvalidEndpoint(
            "Webhooks are sent over HTTPS only: plain http:// is for receivers inside the "
            "operator's own networks (PAPERLANE_WEBHOOK_ALLOWED_NETWORKS), and none is set."
        )
    return url


def _check_events(events) -> list[str]:
    chosen = list(dict.fromkeys(events or []))
    unknown = [e for e in chosen if e not in SUBSCRIBABLE]
    if not chosen or unknown:
        raise InvalidEndpoint(
            "Choose the events to send, among: " + ", ".join(SUBSCRIBABLE) + ".",
            code="invalid_webhook_events",
        )
    return chosen


def _check_description(description: str) -> str:
    description = (description or "").strip()
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise InvalidEndpoint(f"A description is at most {MAX_DESCRIPTION_CHARS} characters.")
    return description


def _sealed(secret: str) -> str:
    return credentials_encrypt({"secret": secret})


def endpoint_create(
    *,
    organisation: Organisation,
    url: str,
    events: list[str],
    actor: Actor,
    description: str = "",
) -> tuple[WebhookEndpoint, str]:
    """A new enabled endpoint and its signing secret, which is never shown again.
    Conflict when the organisation has MAX_ENDPOINTS already (webhooks/limits.py)."""
    actor.require(organisation_id=organisation.id, ability=Ability.WEBHOOKS)
    url, events = _check_url(url), _check_events(events)
    description = _check_description(description)
    secret = secret_new()
    with transaction.atomic():
        # The organisation's row orders concurrent creates; NO KEY: uploads never wait.
        Organisation.objects.select_for_update(no_key=True).filter(id=organisation.id).exists()
        limit = MAX_ENDPOINTS
        if WebhookEndpoint.objects.filter(organisation=organisation).count() >= limit:
            raise Conflict(
                f"The organisation has its limit of {limit} webhook endpoints; delete one "
                "it no longer uses first.",
                code="webhook_endpoint_limit_reached",
            )
        endpoint = WebhookEndpoint.objects.create(
            organisation=organisation,
            url=url,
            events=events,
            description=description,
            secret=_sealed(secret),
            created_by=actor.user,
        )
    return endpoint, secret


def endpoint_update(
    *,
    endpoint: WebhookEndpoint,
    actor: Actor,
    url: str | None = None,
    events: list[str] | None = None,
    description: str | None = None,
    enabled: bool | None = None,
) -> WebhookEndpoint:
    """Change what is given. Enabling a disabled endpoint clears why it was disabled and
    its failures; disabling it leaves its pending deliveries unsent."""
    actor.require(organisation_id=endpoint.organisation_id, ability=Ability.WEBHOOKS)
    changed = []
    if url is not None:
        endpoint.url = _check_url(url)
        changed.append("url")
    if events is not None:
        endpoint.events = _check_events(events)
        changed.append("events")
    if description is not None:
        endpoint.description = _check_description(description)
        changed.append("description")
    with transaction.atomic():
        if changed:
            endpoint.save(update_fields=[*changed, "updated_at"])
        if enabled is True and not endpoint.enabled:
            endpoint.enabled, endpoint.disabled_reason, endpoint.failing_since = True, "", None
            endpoint.save(
                update_fields=["enabled", "disabled_reason", "failing_since", "updated_at"]
            )
        elif enabled is False and endpoint.enabled:
            endpoint_disable(endpoint=endpoint, reason=f"Disabled by {actor.label}.")
    return endpoint


def endpoint_secret_rotate(
    *, endpoint: WebhookEndpoint, actor: Actor
) -> tuple[WebhookEndpoint, str]:
    """A new signing secret, returned once; deliveries are signed with the old one too for
    a day (SECRET_OVERLAP), so receivers can change over meanwhile."""
    actor.require(organisation_id=endpoint.organisation_id, ability=Ability.WEBHOOKS)
    secret = secret_new()
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().get(id=endpoint.id)
        endpoint.previous_secret = endpoint.secret
        endpoint.previous_secret_until = timezone.now() + SECRET_OVERLAP
        endpoint.secret = _sealed(secret)
        endpoint.save(
            update_fields=["previous_secret", "previous_secret_until", "secret", "updated_at"]
        )
    return endpoint, secret


def endpoint_delete(*, endpoint: WebhookEndpoint, actor: Actor) -> None:
    """Delete the endpoint with its deliveries: nothing more is sent to it."""
    actor.require(organisation_id=endpoint.organisation_id, ability=Ability.WEBHOOKS)
    endpoint.delete()


def delivery_send_again(*, delivery: WebhookDelivery, actor: Actor) -> WebhookDelivery:
    """Send a delivery again now (once: a failure dead-letters it again), whatever became
    of it. Conflict while its endpoint is disabled."""
    endpoint = delivery.endpoint
    actor.require(organisation_id=endpoint.organisation_id, ability=Ability.WEBHOOKS)
    if not endpoint.enabled:
        raise Conflict("Enable the endpoint first: nothing is sent to a disabled endpoint.")
    with transaction.atomic():
        WebhookDelivery.objects.filter(id=delivery.id).update(
            status=DeliveryStatus.PENDING, next_attempt_at=timezone.now()
        )
        _wake_on_commit(endpoint)
    delivery.refresh_from_db()
    return delivery


def endpoint_test_send(*, endpoint: WebhookEndpoint, actor: Actor) -> WebhookDelivery:
    """Send the endpoint a `webhook.test` event now, whatever events it wants; Conflict
    while it is disabled."""
    actor.require(organisation_id=endpoint.organisation_id, ability=Ability.WEBHOOKS)
    if not endpoint.enabled:
        raise Conflict("Enable the endpoint first: nothing is sent to a disabled endpoint.")
    with transaction.atomic():
        event = WebhookEvent.objects.create(
            organisation_id=endpoint.organisation_id,
            type=EventType.TEST,
            data={"endpoint_id": str(endpoint.id), "requested_by": actor.label},
        )
        delivery = WebhookDelivery.objects.create(
            id=uuid.uuid4(), event=event, endpoint=endpoint, next_attempt_at=timezone.now()
        )
        _wake_on_commit(endpoint)
    return delivery


def _wake_on_commit(endpoint: WebhookEndpoint) -> None:
    turn = WebhookEndpoint.objects.filter(id=endpoint.id).values_list("turn", flat=True).get()
    wake = Wake(endpoint.id, turn)
    transaction.on_commit(lambda: endpoints_wake([wake], in_request=True))


def endpoint_secrets_reencrypt() -> ReencryptReport:
    """Rewrite every endpoint's stored secrets under the newest of PAPERLANE_CONNECTOR_KEYS
    (`reencrypt_connector_credentials` calls it with the connections'), each under its
    row lock; running it again rewrites nothing."""
    reencrypted, current, unreadable = 0, 0, []
    for endpoint_id in WebhookEndpoint.objects.order_by("id").values_list("id", flat=True):
        with transaction.atomic():
            endpoint = WebhookEndpoint.objects.select_for_update().filter(id=endpoint_id).first()
            if endpoint is None:
                continue
            fields = [f for f in ("secret", "previous_secret") if getattr(endpoint, f)]
            if all(credentials_under_newest_key(getattr(endpoint, f)) for f in fields):
                current += 1
                continue
            try:
                for field in fields:
                    setattr(endpoint, field, credentials_reencrypt(getattr(endpoint, field)))
            except CredentialsUnreadable:
                unreadable.append(endpoint_id)
                continue
            endpoint.save(update_fields=[*fields, "updated_at"])
            reencrypted += 1
    return ReencryptReport(reencrypted=reencrypted, current=current, unreadable=unreadable)
