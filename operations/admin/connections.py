"""The operator's admin for connected folders: each connection with its cursor, last
error, counts and recent syncs; pause, resume and "sync now" through the services;
the files it recorded, read-only. Registered when operations/admin/__init__.py loads it."""

from django.contrib import admin, messages
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html

from connectors.models import Connection, ConnectionSync, ConnectorImport
from connectors.services import (
    SYNCS_ALWAYS_KEPT,
    connection_disconnect,
    connection_pause,
    connection_request_sync,
    connection_resume,
)
from core.errors import ServiceError
from operations.admin.listing import (
    FastListAdmin,
    OrganisationFilter,
    RecordAdmin,
    RelatedChoiceFilter,
)
from pipeline.services.transitions import Actor

FAILED_ROWS = 20
HISTORY_ROWS = 50
CURSOR_CHARS = 400


class ConnectionFilter(RelatedChoiceFilter):
    title = "connection"
    parameter_name = "connection__id__exact"
    field = "connection"

    def rows(self):
        return Connection.objects.order_by("organisation__slug", "folder_path", "id")

    def labelled(self, queryset):
        # As Connection's name reads, from one query that leaves the cursor behind.
        rows = queryset.values_list("id", "provider", "folder_path", "organisation__slug")
        return [
            (str(id_), f"{Connection.Provider(provider).label} {path} ({slug})")
            for id_, provider, path, slug in rows
        ]


@admin.register(Connection)
class ConnectionAdmin(FastListAdmin):
    list_display = [
        "id",
        "organisation",
        "provider",
        "folder_path",
        "status",
        "last_sync_at",
        "last_sync_result",
        "consecutive_failures",
        "files_imported",
        "files_failed",
        "files_skipped",
        "files_seen",
    ]
    list_filter = ["status", "provider", OrganisationFilter]
    list_select_related = ["organisation"]
    # A OneDrive delta link can run to megabytes; the list does not show it.
    list_defer = ("cursor",)
    search_fields = ["folder_path", "organisation__slug"]
    ordering = ["-created_at", "-id"]
    actions = ["sync_now", "pause", "resume", "disconnect"]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "organisation",
                    "provider",
                    "folder_path",
                    "folder_id",
                    ("created_by", "created_at"),
                ]
            },
        ),
        (
            "State",
            {
                "fields": [
                    ("status", "status_reason"),
                    ("last_sync_at", "last_sync_result", "consecutive_failures"),
                    ("last_problem", "last_error"),
                    ("next_sync_at", "sync_requested_at"),
                    ("sync_owner", "sync_lease_until"),
                ]
            },
        ),
        (
            "Files",
            {"fields": [("files_seen", "files_imported", "files_failed", "files_skipped")]},
        ),
        ("Cursor", {"fields": ["cursor_text", "reconcile_since"]}),
        ("History", {"fields": ["history"]}),
        ("Recent syncs", {"fields": ["recent_syncs"]}),
        ("Files that failed", {"fields": ["failed_files"]}),
    ]
    readonly_fields = [
        "organisation",
        "provider",
        "folder_path",
        "folder_id",
        "created_by",
        "created_at",
        "status",
        "status_reason",
        "last_sync_at",
        "last_sync_result",
        "consecutive_failures",
        "last_problem",
        "last_error",
        "next_sync_at",
        "sync_requested_at",
        "sync_owner",
        "sync_lease_until",
        "files_seen",
        "files_imported",
        "files_failed",
        "files_skipped",
        "cursor_text",
        "reconcile_since",
        "history",
        "recent_syncs",
        "failed_files",
    ]

    def has_add_permission(self, request):
        # Connections are made by connecting (the members' pages, `connect_folder`).
        return False

    @admin.display(description="cursor")
    def cursor_text(self, connection):
        cursor = connection.cursor
        if len(cursor) > CURSOR_CHARS:
            cursor = f"{cursor[:CURSOR_CHARS]}… ({len(connection.cursor):,} characters)"
        return format_html("<code>{}</code>", cursor or "(none yet)")

    @admin.display(description="history")
    def history(self, connection):
        return render_to_string(
            "admin/connectors/connection/events.html",
            {"events": connection.events.all()[:HISTORY_ROWS]},
        )

    @admin.display(description="recent syncs")
    def recent_syncs(self, connection):
        return render_to_string(
            "admin/connectors/connection/syncs.html",
            {"syncs": ConnectionSync.objects.filter(connection=connection)[:SYNCS_ALWAYS_KEPT]},
        )

    @admin.display(description="files that failed")
    def failed_files(self, connection):
        failed = ConnectorImport.objects.filter(
            connection=connection, state=ConnectorImport.State.FAILED
        ).select_related("run")
        url = reverse("admin:connectors_connectorimport_changelist")
        return render_to_string(
            "admin/connectors/connection/failed.html",
            {
                "failed": failed.order_by("-updated_at", "-id")[:FAILED_ROWS],
                "count": failed.count(),
                "all_url": f"{url}?connection__id__exact={connection.id}&state__exact=failed",
            },
        )

    def _each(self, request, queryset, act, done: str) -> None:
        changed = 0
        for connection in queryset:
            try:
                act(connection)
                changed += 1
            except ServiceError as exc:
                messages.error(request, f"{connection}: {exc.message}")
        if changed:
            messages.success(request, f"{changed} connection(s) {done}.")

    @admin.action(description="Sync the selected connections now", permissions=["change"])
    def sync_now(self, request, queryset):
        self._each(
            request,
            queryset,
            lambda c: connection_request_sync(
                connection_id=c.id, actor=Actor.of_operator(request.user)
            ),
            "will sync in a moment (paused ones once resumed)",
        )

    @admin.action(description="Pause the selected connections", permissions=["change"])
    def pause(self, request, queryset):
        reason = f"paused by operator {request.user}"
        actor = Actor.of_operator(request.user)
        self._each(
            request,
            queryset,
            lambda c: connection_pause(connection=c, reason=reason, actor=actor),
            "paused",
        )

    @admin.action(description="Resume the selected connections", permissions=["change"])
    def resume(self, request, queryset):
        actor = Actor.of_operator(request.user)
        self._each(
            request, queryset, lambda c: connection_resume(connection=c, actor=actor), "resumed"
        )

    @admin.action(
        description="Disconnect the selected connections (tokens deleted, documents kept)",
        permissions=["change"],
    )
    def disconnect(self, request, queryset):
        actor = Actor.of_operator(request.user)
        self._each(
            request,
            queryset,
            lambda c: connection_disconnect(connection=c, actor=actor),
            "disconnected",
        )


@admin.register(ConnectorImport)
class ConnectorImportAdmin(FastListAdmin, RecordAdmin):
    """Each file version a connection recorded: read-only, as the sync wrote it."""

    list_display = [
        "path",
        "content_version",
        "connection",
        "state",
        "reason",
        "document",
        "document_version",
        "duplicate_of",
        "created_at",
    ]
    list_filter = ["state", ConnectionFilter]
    # A connection's name shows its organisation; its cursor stays in the database.
    list_select_related = ["connection__organisation", "document", "duplicate_of"]
    list_defer = ("connection__cursor",)
    search_fields = ["path", "file_id"]
    ordering = ["-created_at", "-id"]
