"""The operator's admin for webhooks: every organisation's endpoints (never their secrets)
and deliveries with each try; enable, disable and send a test event on endpoints, send
deliveries again. Actions go through webhooks/services.py, as the organisation's admins'
do, and are written to the admin's log."""

from django.contrib import admin, messages
from django.utils.html import format_html

from core.errors import ServiceError
from operations.admin.listing import FastListAdmin, OrganisationFilter, RecordAdmin
from pipeline.services.transitions import Actor
from webhooks.events import event_id_text
from webhooks.models import DeliveryAttempt, WebhookDelivery, WebhookEndpoint
from webhooks.services import delivery_send_again, endpoint_test_send, endpoint_update


def _may_operate(request, model: str) -> bool:
    """The actions are for operators who may change the model (the records themselves are
    never edited by hand)."""
    return request.user.has_perm(f"webhooks.change_{model}")


def _each(modeladmin, request, objects, do, done: str) -> None:
    actor = Actor.of_operator(request.user)
    changed = 0
    for obj in objects:
        try:
            do(obj, actor)
        except ServiceError as exc:
            modeladmin.message_user(request, f"{obj}: {exc.message}", messages.WARNING)
            continue
        modeladmin.log_change(request, obj, done)
        changed += 1
    modeladmin.message_user(request, f"{changed} {done}.")


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(FastListAdmin, RecordAdmin):
    list_display = [
        "url",
        "organisation",
        "events_shown",
        "enabled",
        "failing_since",
        "disabled_reason",
        "created_at",
    ]
    list_filter = ["enabled", OrganisationFilter]
    list_select_related = ["organisation"]
    search_fields = ["url", "description"]
    ordering = ["-created_at", "id"]
    # The secrets are never shown, even encrypted; the URL as text (the admin would make
    # it a link to the receiver's host).
    fields = [
        "organisation",
        "url_text",
        "description",
        "events_shown",
        "enabled",
        "disabled_reason",
        "failing_since",
        "previous_secret_until",
        "lease_owner",
        "lease_expires_at",
        "turn",
        "created_by",
        "created_at",
        "updated_at",
    ]
    readonly_fields = fields
    actions = ["send_test", "disable", "enable"]

    @admin.display(description="URL")
    def url_text(self, obj):
        return obj.url

    @admin.display(description="events")
    def events_shown(self, obj):
        return ", ".join(obj.events)

    @admin.action(description="Send a test event", permissions=["operate"])
    def send_test(self, request, queryset):
        _each(
            self,
            request,
            queryset,
            lambda e, actor: endpoint_test_send(endpoint=e, actor=actor),
            "test events queued",
        )

    @admin.action(
        description="Disable (their pending deliveries are not sent)", permissions=["operate"]
    )
    def disable(self, request, queryset):
        _each(
            self,
            request,
            queryset,
            lambda e, actor: endpoint_update(endpoint=e, actor=actor, enabled=False),
            "endpoints disabled",
        )

    @admin.action(description="Enable (their failures forgotten)", permissions=["operate"])
    def enable(self, request, queryset):
        _each(
            self,
            request,
            queryset,
            lambda e, actor: endpoint_update(endpoint=e, actor=actor, enabled=True),
            "endpoints enabled",
        )

    def has_operate_permission(self, request):
        return _may_operate(request, "webhookendpoint")


class DeliveryAttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    fields = [
        "number",
        "outcome",
        "status_code",
        "error",
        "response_excerpt",
        "worker",
        "started_at",
        "duration",
    ]
    readonly_fields = fields
    ordering = ["number"]
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False

    @admin.display(description="ms")
    def duration(self, obj):
        return obj.duration_ms


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(FastListAdmin, RecordAdmin):
    list_display = [
        "event_shown",
        "endpoint",
        "status",
        "attempts",
        "next_attempt_at",
        "last_status_code",
        "last_error",
        "created_at",
    ]
    list_filter = ["status"]
    list_select_related = ["event", "endpoint"]
    search_fields = ["=event__id", "endpoint__url"]
    ordering = ["-created_at", "id"]
    inlines = [DeliveryAttemptInline]
    actions = ["send_again"]

    @admin.display(description="event")
    def event_shown(self, obj):
        return format_html("{} <code>{}</code>", obj.event.type, event_id_text(obj.event_id))

    @admin.action(description="Send again now (the same event id)", permissions=["operate"])
    def send_again(self, request, queryset):
        _each(
            self,
            request,
            queryset.select_related("endpoint"),
            lambda d, actor: delivery_send_again(delivery=d, actor=actor),
            "deliveries sent again",
        )

    def has_operate_permission(self, request):
        return _may_operate(request, "webhookdelivery")
