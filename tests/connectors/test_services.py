"""Connections' credentials at rest, and the connection services people call."""

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection as db

from connectors.models import Connection
from connectors.services import (
    SYSTEM,
    connection_connect_onedrive,
    connection_create_local,
    connection_credentials,
    connection_disconnect,
    connection_pause,
    connection_request_sync,
    connection_resume,
    connection_set_credentials,
)
from core.errors import Conflict, Forbidden, InvalidUpload
from core.secrets import CredentialsUnreadable
from documents.services.organisations import member_add
from pipeline.services.transitions import Actor
from tests.connectors.signers import signer

pytestmark = pytest.mark.django_db

SECRET = {"refresh_token": "M.R3_BAY.very-secret-refresh-token", "access_token": "EwB-access"}


def stored_column(connection: Connection) -> str:
    with db.cursor() as cursor:
        cursor.execute(
            "SELECT credentials_encrypted FROM documents_connection WHERE id = %s",
            [connection.id],
        )
        return cursor.fetchone()[0]


def onedrive(org, credentials=SECRET) -> Connection:
    return connection_connect_onedrive(
        organisation=org,
        drive_id="b!drive",
        folder_id="01ABCDEF",
        folder_path="/Documents/Contracts",
        credentials=credentials,
        created_by=signer(org),
    )


def test_credentials_are_encrypted_at_rest_and_read_back(org):
    connection = onedrive(org)

    raw = stored_column(connection)
    assert raw and "very-secret" not in raw and "refresh_token" not in raw
    assert connection_credentials(connection=Connection.objects.get(id=connection.id)) == SECRET
    connection_set_credentials(connection=connection, credentials={"refresh_token": "new"})
    assert stored_column(connection) != raw
    assert connection_credentials(connection=connection) == {"refresh_token": "new"}


def test_credentials_written_under_another_key_cannot_be_read(org, settings):
    connection = onedrive(org)
    settings.SECRET_KEY = "a-different-secret-key"

    with pytest.raises(CredentialsUnreadable):
        connection_credentials(connection=connection)


def test_a_key_of_its_own_is_used_when_set_and_checked(org, settings):
    settings.PAPERLANE_CONNECTOR_KEYS = ["Zm9yLXRlc3RzLW9ubHktMzItYnl0ZXMta2V5LXBscyE="]
    connection = onedrive(org)
    settings.SECRET_KEY = "rotated-secret-key"
    assert connection_credentials(connection=connection) == SECRET

    settings.PAPERLANE_CONNECTOR_KEYS = ["not-a-fernet-key"]
    with pytest.raises(ImproperlyConfigured, match="PAPERLANE_CONNECTOR_KEYS: key 1"):
        connection_credentials(connection=connection)


def test_a_connection_that_needs_reconnecting_resumes_only_by_reconnecting(org):
    connection = onedrive(org)
    Connection.objects.filter(id=connection.id).update(status="needs_reconnect")

    with pytest.raises(Conflict):
        connection_resume(connection=connection, actor=SYSTEM)
    back = onedrive(org, credentials={"refresh_token": "again"})  # signing in again

    assert back.status == "active" and connection_credentials(connection=back) == {
        "refresh_token": "again"
    }


def test_pause_and_resume_are_idempotent(org, tmp_path):
    (tmp_path / "scans").mkdir()
    connection = connection_create_local(organisation=org, path=str(tmp_path / "scans"))
    Connection.objects.filter(id=connection.id).update(consecutive_failures=4)
    connection_pause(connection=connection, reason="first", actor=SYSTEM)
    again = connection_pause(connection=connection, reason="second", actor=SYSTEM)
    assert (again.status, again.status_reason) == ("paused", "first")
    resumed = connection_resume(connection=connection, actor=SYSTEM)
    resumed.refresh_from_db()
    assert resumed.status == "active" and resumed.consecutive_failures == 0
    assert connection_resume(connection=connection, actor=SYSTEM).status == "active"


def test_a_local_folder_must_exist_and_is_connected_once(org, tmp_path):
    with pytest.raises(InvalidUpload, match="is not a folder"):
        connection_create_local(organisation=org, path=str(tmp_path / "missing"))
    (tmp_path / "scans").mkdir()
    first = connection_create_local(organisation=org, path=str(tmp_path / "scans"))
    assert connection_create_local(organisation=org, path=f"{tmp_path}/scans/./").id == first.id


def test_sync_now_is_for_those_who_may_upload(org, other_org, tmp_path):
    (tmp_path / "scans").mkdir()
    connection = connection_create_local(organisation=org, path=str(tmp_path / "scans"))
    viewer = member_add(organisation=org, username="vera", role="viewer")
    member = member_add(organisation=org, username="max", role="member")
    outsider = member_add(organisation=other_org, username="mallory", role="admin")
    operator = member_add(organisation=other_org, username="olga", staff=True)

    for person in (viewer, outsider):
        with pytest.raises(Forbidden):
            connection_request_sync(connection_id=connection.id, actor=Actor.of(user=person))
    assert Connection.objects.get(id=connection.id).sync_requested_at is None

    assert connection_request_sync(connection_id=connection.id, actor=Actor.of(user=member))
    assert connection_request_sync(connection_id=connection.id, actor=Actor.of_operator(operator))
    assert connection_request_sync(connection_id=connection.id, actor=SYSTEM)
    assert Connection.objects.get(id=connection.id).sync_requested_at is not None
    assert not connection_request_sync(connection_id=10**9, actor=Actor.of(user=member))


def test_the_services_take_their_actor_by_name_with_no_default(org, tmp_path):
    (tmp_path / "scans").mkdir()
    connection = connection_create_local(organisation=org, path=str(tmp_path / "scans"))

    for call in (
        lambda: connection_pause(connection=connection),
        lambda: connection_resume(connection=connection),
        lambda: connection_disconnect(connection=connection),
        lambda: connection_request_sync(connection_id=connection.id),
    ):
        with pytest.raises(TypeError):
            call()
    assert Connection.objects.get(id=connection.id).status == "active"


def test_connecting_onedrive_takes_an_admin_connecting_or_a_named_actor(org):
    member = member_add(organisation=org, username="max", role="member")
    connect = dict(
        organisation=org,
        drive_id="b!drive",
        folder_id="01ABCDEF",
        folder_path="/Contracts",
        credentials=SECRET,
    )

    with pytest.raises(TypeError):
        connection_connect_onedrive(**connect, created_by=None)
    with pytest.raises(Forbidden, match="You have the member role"):
        connection_connect_onedrive(**connect, created_by=member)
    assert not Connection.objects.exists()

    connection = connection_connect_onedrive(**connect, created_by=signer(org))
    assert connection.created_by.username == "signer-acme" and connection.status == "active"
