"""A OneDrive connection reads with the sign-in of whoever connected it: once they are no
member (they left, their account was deleted), nothing uses their tokens any more. The
upkeep neither refreshes nor renews anything for a connection that does not sync, and
files queued before they left are not fetched."""

import pytest
from django.contrib.auth.models import User

from connectors.base import NeedsReconnect, RemoteFile
from connectors.loop import connectors_maintain
from connectors.models import Connection, ConnectionEvent, ConnectorImport
from connectors.registry import PROVIDERS
from connectors.services import SYSTEM, connection_pause
from connectors.sync import connection_refresh_imports
from documents.models import Document
from documents.services.organisations import member_add, member_remove
from pipeline.services.people import run_retry
from pipeline.services.transitions import Actor
from tests.support.files import make_pdf
from tests.support.folders import sync
from tests.support.providers import ScriptedProvider, page
from tests.support.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def remote(monkeypatch):
    """OneDrive stood in for by a scripted provider, which notes whose upkeep it did and
    which files it was asked for."""
    monkeypatch.setitem(PROVIDERS, "onedrive", "tests.support.providers.ScriptedProvider")
    ScriptedProvider.script, ScriptedProvider.files = [], {}
    monkeypatch.setattr(ScriptedProvider, "maintained", [], raising=False)
    monkeypatch.setattr(ScriptedProvider, "opened", [], raising=False)
    original_open = ScriptedProvider.open

    def maintain(self, connection):
        type(self).maintained.append(connection.id)
        if type(self).maintain_error is not None:
            raise type(self).maintain_error

    def opened(self, connection, file_id):
        type(self).opened.append(file_id)
        return original_open(self, connection, file_id)

    monkeypatch.setattr(ScriptedProvider, "maintain", maintain)
    monkeypatch.setattr(ScriptedProvider, "open", opened)
    yield ScriptedProvider
    ScriptedProvider.script, ScriptedProvider.files = [], {}
    ScriptedProvider.maintain_error = None


@pytest.fixture
def alice(org):
    return member_add(organisation=org, username="alice", role="admin")


def onedrive(org, user, folder_id="FOLDER") -> Connection:
    return Connection.objects.create(
        organisation=org,
        provider="onedrive",
        folder_id=folder_id,
        folder_path=f"/{folder_id}",
        created_by=user,
    )


def a_file(name="a") -> RemoteFile:
    return RemoteFile(file_id=name, version="v1", name=f"{name}.pdf", path=f"{name}.pdf")


def test_the_upkeep_leaves_connections_that_do_not_sync_alone(remote, org, alice):
    by_status = {
        status: onedrive(org, alice, folder_id=status.upper())
        for status in ("active", "error", "paused", "needs_reconnect", "disconnected")
    }
    for status, connection in by_status.items():
        Connection.objects.filter(id=connection.id).update(status=status)

    connectors_maintain()

    assert sorted(remote.maintained) == sorted([by_status["active"].id, by_status["error"].id])
    # A refresh token refused during upkeep does not turn a paused one "needs reconnect".
    remote.maintain_error = NeedsReconnect("The refresh token was refused.")
    connectors_maintain()
    statuses = dict(Connection.objects.values_list("folder_id", "status"))
    assert statuses["PAUSED"] == "paused" and statuses["ACTIVE"] == "needs_reconnect"


def test_the_upkeep_pauses_a_connection_read_with_a_non_members_sign_in(remote, org, alice):
    stranger = User.objects.create(username="stranger")
    theirs, unsigned = onedrive(org, stranger), onedrive(org, None, folder_id="UNSIGNED")
    mine = onedrive(org, alice, folder_id="MINE")

    connectors_maintain()

    assert remote.maintained == [mine.id]
    statuses = dict(Connection.objects.values_list("id", "status"))
    assert (statuses[theirs.id], statuses[unsigned.id], statuses[mine.id]) == (
        "paused",
        "paused",
        "active",
    )
    event = ConnectionEvent.objects.get(connection=theirs, action="paused")
    assert (event.actor, event.reason) == (
        "system",
        "Paused: stranger, who connected it, is no longer a member of Acme.",
    )
    connectors_maintain()
    assert remote.maintained == [mine.id, mine.id]


def one_file_queued(remote, org, alice):
    """Alice's OneDrive connection, synced once: one file's run queued, not fetched yet."""
    connection = onedrive(org, alice)
    remote.files = {"a": make_pdf(1)}
    remote.script = [[page(a_file(), cursor="d1")]]
    [run_id] = sync(connection).counts.run_ids
    return connection, run_id


def test_files_queued_before_the_signer_left_are_not_fetched_until_connected_again(
    remote, org, alice
):
    connection, run_id = one_file_queued(remote, org, alice)

    member_remove(organisation=org, user=alice)
    run = drive(run_id)

    assert (run.status, run.error_code) == ("failed", "connected_by_former_member")
    assert "no longer a member" in run.error_message
    assert remote.opened == [] and not Document.objects.filter(sha256__gt="").exists()
    connection_refresh_imports(connection=connection)
    assert ConnectorImport.objects.get(run_id=run_id).state == "failed"
    # Bob connects it again with his sign-in: the file is retried and fetched.
    bob = member_add(organisation=org, username="bob", role="admin")
    Connection.objects.filter(id=connection.id).update(created_by=bob, status="active")
    run_retry(run=run, actor=Actor.of(user=bob))
    assert drive(run_id).status == "succeeded" and remote.opened == ["a"]


def test_files_of_a_connection_whose_signers_account_was_deleted_are_not_fetched(
    remote, org, alice
):
    connection, run_id = one_file_queued(remote, org, alice)

    alice.delete()
    run = drive(run_id)

    assert (run.status, run.error_code) == ("failed", "connected_by_former_member")
    assert remote.opened == []
    assert Connection.objects.get(id=connection.id).status == "paused"


def test_a_paused_connections_queued_files_are_still_fetched_while_its_signer_is_a_member(
    remote, org, alice
):
    connection, run_id = one_file_queued(remote, org, alice)

    connection_pause(connection=connection, actor=SYSTEM, reason="paused by a person")

    assert drive(run_id).status == "succeeded" and remote.opened == ["a"]
