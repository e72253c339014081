from django.urls import path

from jobs.connectors import onedrive_views

app_name = "onedrive"

urlpatterns = [
    path("connect/", onedrive_views.onedrive_connect_view, name="connect"),
    path("callback/", onedrive_views.onedrive_callback_view, name="callback"),
    path("notifications/", onedrive_views.onedrive_notifications_view, name="notifications"),
]
