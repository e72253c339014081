"""Reads of an organisation's connections. Another organisation's ids are simply not found."""

from django.db.models import QuerySet

from connectors.models import Connection
from core.errors import NotFound
from documents.models import Organisation


def connection_list(*, organisation: Organisation) -> QuerySet[Connection]:
    return Connection.objects.filter(organisation=organisation).order_by("-created_at", "-id")


def connection_get(*, organisation: Organisation, connection_id: int) -> Connection:
    try:
        return Connection.objects.get(organisation=organisation, id=connection_id)
    except Connection.DoesNotExist:
        raise NotFound("Connection not found.") from None
