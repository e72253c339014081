"""Webhook endpoints, the events they are told of, and each delivery of an event to an
endpoint with every try.

An event is written in the transaction of the change it tells of (the outbox), with a
delivery for each enabled endpoint of its organisation that wants its type; workers
deliver them (webhooks/delivery.py). Nothing is written when no endpoint wants it.
"""

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q


class EventType(models.TextChoices):
    RUN_SUCCEEDED = "run.succeeded", "A run succeeded"
    RUN_FAILED = "run.failed", "A run failed"
    RUN_DEAD_LETTER = "run.dead_letter", "A run went to the dead letter"
    RUN_CANCELLED = "run.cancelled", "A run was cancelled"
    DOCUMENT_DELETED = "document.deleted", "A document was deleted"
    CONNECTION_PAUSED = "connection.paused", "A connected folder was paused"
    # Sent on request only ("send a test event"), whatever the endpoint wants.
    TEST = "webhook.test", "A test event"


# The events an endpoint may ask for.
SUBSCRIBABLE = tuple(value for value in EventType.values if value != EventType.TEST)


class WebhookEndpoint(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organisation = models.ForeignKey(
        "documents.Organisation", on_delete=models.CASCADE, related_name="webhook_endpoints"
    )
    url = models.URLField(max_length=2000)
    description = models.CharField(max_length=200, blank=True)
    events = ArrayField(models.CharField(max_length=40))
    enabled = models.BooleanField(default=True)
    # Why it was disabled: by whom, or by its receiver (410, a day of failures).
    disabled_reason = models.CharField(max_length=300, blank=True)
    # The signing secret ("whsec_…") and, for a stated while after a rotation, the one
    # before it; both encrypted at rest (core/secrets.py).
    secret = models.TextField()
    previous_secret = models.TextField(blank=True)
    previous_secret_until = models.DateTimeField(null=True, blank=True)
    # The first failed try since the last success: a day of them disables it.
    failing_since = models.DateTimeField(null=True, blank=True)
    # A worker delivering its events holds it (one at a time, in order) until then.
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # Counts its workers' turns: a turn's job id names it, so a new turn is a new job.
    turn = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "webhook endpoint"
        indexes = [models.Index(fields=["organisation", "created_at"], name="endpoint_org")]

    def __str__(self) -> str:
        return self.url


class WebhookEvent(models.Model):
    """What happened, once: its id is the `webhook-id` of every try to every endpoint."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organisation = models.ForeignKey(
        "documents.Organisation", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    type = models.CharField(max_length=40, choices=EventType.choices)
    # The body's `data`: ids and URLs, never a document's text.
    data = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "webhook event"

    def __str__(self) -> str:
        return f"{self.type} {self.id}"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    SUCCEEDED = "succeeded", "Delivered"
    # The schedule ended without a success: sent again only when someone asks.
    DEAD_LETTER = "dead_letter", "Dead letter"
    # Its endpoint was disabled or deleted before it was delivered.
    SKIPPED = "skipped", "Not sent"


class WebhookDelivery(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    event = models.ForeignKey(WebhookEvent, on_delete=models.CASCADE, related_name="deliveries")
    endpoint = models.ForeignKey(
        WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries", db_index=False
    )
    status = models.CharField(
        max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING
    )
    # Tries made (a try a killed worker began counts).
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # The last try's answer, as its list shows it.
    last_status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=300, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "webhook delivery"
        verbose_name_plural = "webhook deliveries"
        indexes = [
            # An endpoint's list of deliveries, newest first.
            models.Index(fields=["endpoint", "-created_at"], name="delivery_endpoint_recent"),
            # What is due: a worker's next delivery, the sweeper's endpoints to wake.
            models.Index(
                fields=["endpoint", "next_attempt_at"],
                name="delivery_due",
                condition=Q(status="pending"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event_id} to {self.endpoint_id}"


class DeliveryAttempt(models.Model):
    """One try: begun before the request is sent, so a worker killed during it leaves a
    try with no outcome (closed as interrupted by the next)."""

    class Outcome(models.TextChoices):
        SENDING = "sending", "Sending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed"
        INTERRUPTED = "interrupted", "Interrupted"

    delivery = models.ForeignKey(
        WebhookDelivery, on_delete=models.CASCADE, related_name="tries", db_index=False
    )
    number = models.PositiveSmallIntegerField()
    outcome = models.CharField(max_length=16, choices=Outcome.choices, default=Outcome.SENDING)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    # Why it failed (no answer, refused address, …), for the endpoint's admins.
    error = models.CharField(max_length=300, blank=True)
    # The first characters of the receiver's answer, as text.
    response_excerpt = models.CharField(max_length=500, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "delivery try"
        # The last hour's tries, for /metrics and the dashboard.
        indexes = [models.Index(fields=["started_at"], name="delivery_try_started")]
        constraints = [
            models.UniqueConstraint(fields=["delivery", "number"], name="delivery_try_unique"),
        ]

    def __str__(self) -> str:
        return f"try {self.number} of {self.delivery_id}"

    @property
    def duration_ms(self) -> int | None:
        if self.finished_at is None:
            return None
        return int((self.finished_at - self.started_at).total_seconds() * 1000)
