"""OneDrive connections: made or reconnected when a person finishes Microsoft's sign-in."""

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from connectors.models import Connection
from connectors.secrets import credentials_encrypt
from connectors.services import connection_make_active
from documents.models import Organisation


@transaction.atomic
def connection_connect_onedrive(
    *,
    organisation: Organisation,
    drive_id: str,
    folder_id: str,
    folder_path: str,
    credentials: dict,
    created_by: AbstractBaseUser | None = None,
) -> Connection:
    """The organisation's connection to this OneDrive folder with these credentials,
    active and due to sync now. Connecting the same folder again reconnects it (new
    tokens, same cursor and imports), which is how `needs reconnect` is cleared."""
    connection, _ = Connection.objects.select_for_update().get_or_create(
        organisation=organisation,
        provider=Connection.Provider.ONEDRIVE,
        folder_id=folder_id,
        defaults={"folder_path": folder_path, "created_by": created_by},
    )
    connection.folder_path = folder_path
    connection.credentials_encrypted = credentials_encrypt(credentials)
    connection.provider_state = {**(connection.provider_state or {}), "drive_id": drive_id}
    connection_make_active(
        connection=connection,
        also_save=("folder_path", "credentials_encrypted", "provider_state"),
    )
    return connection
