"""/connections/: members' pages for connected folders. Each provider's own pages (e.g.
OneDrive's connect flow, named `onedrive_connect`) are added here."""

from django.urls import path

from web import connection_views as views
from web import onedrive_views

app_name = "connections"

urlpatterns = [
    path("", views.connection_list_view, name="list"),
    path("local/", views.connection_create_local_view, name="create_local"),
    path("<int:connection_id>/", views.connection_detail_view, name="detail"),
    path(
        "<int:connection_id>/pause/",
        views.connection_action_view,
        {"action": "pause"},
        name="pause",
    ),
    path(
        "<int:connection_id>/resume/",
        views.connection_action_view,
        {"action": "resume"},
        name="resume",
    ),
    path(
        "<int:connection_id>/sync/",
        views.connection_action_view,
        {"action": "sync"},
        name="sync",
    ),
    path(
        "<int:connection_id>/disconnect/",
        views.connection_disconnect_view,
        name="disconnect",
    ),
    # OneDrive: Microsoft sign-in, and Graph's change notifications (public, CSRF-exempt).
    path("onedrive/connect/", onedrive_views.onedrive_connect_view, name="onedrive_connect"),
    path("onedrive/callback/", onedrive_views.onedrive_callback_view, name="onedrive_callback"),
    path(
        "onedrive/notifications/",
        onedrive_views.onedrive_notifications_view,
        name="onedrive_notifications",
    ),
    path(
        "<int:connection_id>/files/<int:import_id>/retry/",
        views.import_retry_view,
        name="import_retry",
    ),
]
