"""The operator's admin: every ModelAdmin of every app, registered when Django's admin
looks for this module. `listing` is what their lists share."""

from django.contrib import admin
from django_rq.admin import QueueAdmin
from django_rq.models import Dashboard

from operations.admin import connections, organisations, runs, webhooks  # noqa: F401

admin.site.site_header = "Paperlane"
admin.site.site_title = "Paperlane"
admin.site.index_title = "Operations"
# The runs list and a run's page need the width; the index and breadcrumbs lead everywhere.
admin.site.enable_nav_sidebar = False


class _QueuesOnce(QueueAdmin):
    """django-rq's pages stay where they are (/admin/django_rq/dashboard/), linked once
    from the index's Operations box instead of a second time as an app of their own."""

    def has_module_permission(self, request):
        return False


if admin.site.is_registered(Dashboard):
    admin.site.unregister(Dashboard)
    admin.site.register(Dashboard, _QueuesOnce)
