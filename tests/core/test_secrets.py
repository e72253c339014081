"""Connector keys: a list newest first (PAPERLANE_CONNECTOR_KEYS), credentials stored
under older keys still read, and re-encrypted under the newest so old keys can go."""

from io import StringIO

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command

from connectors.models import Connection
from connectors.services import (
    connection_connect_onedrive,
    connection_credentials,
    connection_credentials_reencrypt,
)
from core.secrets import CredentialsUnreadable, credentials_under_newest_key
from tests.connectors.signers import signer

pytestmark = pytest.mark.django_db

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()


def onedrive(org, n: int) -> Connection:
    return connection_connect_onedrive(
        organisation=org,
        drive_id="b!drive",
        folder_id=f"FOLDER{n}",
        folder_path=f"/Folder {n}",
        credentials={"refresh_token": f"refresh-{n}", "access_token": f"access-{n}"},
        created_by=signer(org),
    )


def stored(connection: Connection) -> str:
    return Connection.objects.values_list("credentials_encrypted", flat=True).get(id=connection.id)


def read(connection: Connection) -> dict:
    return connection_credentials(connection=Connection.objects.get(id=connection.id))


def test_with_no_key_set_the_key_is_derived_from_the_secret_key(org, settings):
    settings.PAPERLANE_CONNECTOR_KEYS = []
    connection = onedrive(org, 1)

    settings.PAPERLANE_CONNECTOR_KEYS = ["from-secret-key"]
    assert read(connection)["refresh_token"] == "refresh-1"
    settings.SECRET_KEY = "another-secret-key"
    with pytest.raises(CredentialsUnreadable):
        read(connection)


def test_a_new_key_in_front_still_reads_what_older_keys_stored(org, settings):
    settings.PAPERLANE_CONNECTOR_KEYS = []
    derived = onedrive(org, 1)  # under the key derived from SECRET_KEY
    settings.PAPERLANE_CONNECTOR_KEYS = [OLD]
    single = onedrive(org, 2)  # under a key of its own, now the older one

    settings.PAPERLANE_CONNECTOR_KEYS = [NEW, OLD, "from-secret-key"]

    assert read(derived)["refresh_token"] == "refresh-1"
    assert read(single)["refresh_token"] == "refresh-2"
    fresh = onedrive(org, 3)
    assert credentials_under_newest_key(stored(fresh))
    assert not credentials_under_newest_key(stored(single))
    settings.PAPERLANE_CONNECTOR_KEYS = [NEW]  # written with the first key
    assert read(fresh)["refresh_token"] == "refresh-3"


def test_reencrypting_moves_every_token_to_the_newest_key_so_old_keys_can_go(org, settings):
    settings.PAPERLANE_CONNECTOR_KEYS = [OLD]
    connections = [onedrive(org, n) for n in range(3)]
    before = [stored(c) for c in connections]
    settings.PAPERLANE_CONNECTOR_KEYS = [NEW, OLD]
    onedrive(org, 9)  # already under the new key

    out = StringIO()
    call_command("reencrypt_connector_credentials", stdout=out)

    assert "3 re-encrypted with the newest key, 1 already were." in out.getvalue()
    assert all(stored(c) != old for c, old in zip(connections, before, strict=True))
    settings.PAPERLANE_CONNECTOR_KEYS = [NEW]  # the old key is gone
    assert [read(c)["refresh_token"] for c in connections] == [f"refresh-{n}" for n in range(3)]
    again = connection_credentials_reencrypt()
    assert (again.reencrypted, again.current, again.unreadable) == (0, 4, [])


def test_credentials_no_key_reads_are_named_and_the_rest_reencrypted(org, settings):
    settings.PAPERLANE_CONNECTOR_KEYS = [OLD]
    readable = onedrive(org, 1)
    settings.PAPERLANE_CONNECTOR_KEYS = [Fernet.generate_key().decode()]
    lost = onedrive(org, 2)  # under a key nobody has any more
    settings.PAPERLANE_CONNECTOR_KEYS = [NEW, OLD]

    with pytest.raises(
        CommandError, match=rf"key: connections {lost.id}\. Those connections must be connected"
    ):
        call_command("reencrypt_connector_credentials", stdout=StringIO())

    settings.PAPERLANE_CONNECTOR_KEYS = [NEW]
    assert read(readable)["refresh_token"] == "refresh-1"


def test_a_key_that_is_not_a_fernet_key_is_named(org, settings):
    settings.PAPERLANE_CONNECTOR_KEYS = [NEW, "not-a-key"]

    with pytest.raises(ImproperlyConfigured, match="PAPERLANE_CONNECTOR_KEYS: key 2"):
        onedrive(org, 1)
