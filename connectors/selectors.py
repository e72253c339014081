"""Reads of an organisation's connections. Another organisation's ids are simply not found."""

from django.db.models import QuerySet

from connectors.models import Connection, ConnectorImport
from core.errors import NotFound
from documents.models import Document, Membership, Organisation


def connection_list(*, organisation: Organisation) -> QuerySet[Connection]:
    return Connection.objects.filter(organisation=organisation).order_by("-created_at", "-id")


def connection_get(*, organisation: Organisation, connection_id: int) -> Connection:
    try:
        return Connection.objects.get(organisation=organisation, id=connection_id)
    except Connection.DoesNotExist:
        raise NotFound("Connection not found.") from None


def connection_signed_in_by_former_member(connection: Connection) -> bool:
    """Whether `connection` is a OneDrive one that reads with the sign-in of someone who
    is not a member of its organisation: whoever connected it last left, or their account
    was deleted (no one's sign-in then). Its tokens must not be used: it is paused, its
    queued files are not fetched, and it syncs again once a member connects it anew."""
    if connection.provider != Connection.Provider.ONEDRIVE:
        return False
    if connection.created_by_id is None:
        return True
    return not Membership.objects.filter(
        organisation_id=connection.organisation_id, user_id=connection.created_by_id
    ).exists()


def document_file_versions(
    *, document: Document, versions: list[int]
) -> dict[int, ConnectorImport]:
    """The versions of a connected file that became the named `versions` of `document`,
    by the document version each became (none for an upload)."""
    imports = ConnectorImport.objects.filter(document=document, document_version__in=versions)
    return {record.document_version: record for record in imports.order_by("id")}
