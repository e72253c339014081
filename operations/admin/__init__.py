"""The operator's admin: every ModelAdmin of every app, registered when Django's admin
looks for this module. `listing` is what their lists share."""

from operations.admin import connections, organisations, runs  # noqa: F401
