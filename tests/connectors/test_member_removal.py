"""A member who leaves an organisation (the service, the admin, `remove_member`, their
membership's row deleted, their account deleted) has the connections they made there
paused, in the same transaction as the removal; a OneDrive one reads with their sign-in,
so it syncs again only once an admin connects it anew."""

from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from connectors.models import Connection, ConnectionEvent
from connectors.services import (
    connection_connect_onedrive,
    connection_create_local,
    connection_resume,
)
from core.errors import Conflict, Forbidden
from documents.models import Membership
from documents.services import organisations
from documents.services.organisations import member_add, member_remove
from pipeline.services.transitions import Actor
from tests.support.admin import operator_client

pytestmark = pytest.mark.django_db(transaction=True)


def local(org, folder, user) -> Connection:
    folder.mkdir(exist_ok=True)
    return connection_create_local(organisation=org, path=str(folder), created_by=user)


def onedrive(org, user, folder_id="FOLDER") -> Connection:
    return connection_connect_onedrive(
        organisation=org,
        drive_id="b!drive",
        folder_id=folder_id,
        folder_path="/Contracts",
        credentials={"refresh_token": "r", "access_token": "a", "expires_at": 0},
        created_by=user,
    )


@pytest.fixture
def alice(org, other_org):
    user = member_add(organisation=org, username="alice", role="admin")
    member_add(organisation=other_org, username="alice", role="admin")
    return user


@pytest.fixture
def bob(org):
    return member_add(organisation=org, username="bob", role="admin")


def statuses(*connections) -> list[str]:
    return [Connection.objects.get(id=c.id).status for c in connections]


def test_the_connections_a_member_made_pause_when_they_leave_and_no_others(
    org, other_org, alice, bob, tmp_path
):
    hers = [local(org, tmp_path / "hers", alice), onedrive(org, alice)]
    his = local(org, tmp_path / "his", bob)
    elsewhere = onedrive(other_org, alice)

    assert member_remove(organisation=org, user=alice)

    assert statuses(*hers, his, elsewhere) == ["paused", "paused", "active", "active"]
    reason = Connection.objects.get(id=hers[0].id).status_reason
    assert reason == "Paused: alice, who connected it, is no longer a member of Acme."
    event = ConnectionEvent.objects.get(connection=hers[1], action="paused")
    assert (event.actor, event.status_before, event.reason) == ("system", "active", reason)
    assert not Membership.objects.filter(organisation=org, user=alice).exists()
    assert not member_remove(organisation=org, user=alice)  # not a member any more


def test_the_removal_and_the_pause_are_one_transaction(org, alice, tmp_path):
    connection = local(org, tmp_path / "hers", alice)

    def fails(**_):
        raise RuntimeError("a later step of the removal failed")

    organisations.member_removed_register(fails)
    try:
        with pytest.raises(RuntimeError):
            member_remove(organisation=org, user=alice)
    finally:
        organisations._member_removed_hooks.remove(fails)

    assert Membership.objects.filter(organisation=org, user=alice).exists()
    assert statuses(connection) == ["active"]
    assert not ConnectionEvent.objects.filter(action="paused").exists()


def test_a_onedrive_folder_of_someone_who_left_resumes_only_once_connected_again(org, alice, bob):
    connection = onedrive(org, alice)
    member_remove(organisation=org, user=alice)

    with pytest.raises(Conflict, match="connect it again with yours"):
        connection_resume(connection=connection, actor=Actor.of(user=bob))
    assert statuses(connection) == ["paused"]

    onedrive(org, bob)  # Bob signs in to the same folder

    assert statuses(connection) == ["active"]
    assert Connection.objects.get(id=connection.id).created_by == bob


def test_a_local_folder_of_someone_who_left_is_resumed_by_an_admin(org, alice, bob, tmp_path):
    connection = local(org, tmp_path / "hers", alice)
    member_remove(organisation=org, user=alice)

    connection_resume(connection=connection, actor=Actor.of(user=bob))

    assert statuses(connection) == ["active"]


def test_a_plain_member_may_not_resume_it(org, alice, tmp_path):
    connection = local(org, tmp_path / "hers", alice)
    member_remove(organisation=org, user=alice)
    carol = member_add(organisation=org, username="carol", role="member")

    with pytest.raises(Forbidden, match="You have the member role: only admins may"):
        connection_resume(connection=connection, actor=Actor.of(user=carol))

    assert statuses(connection) == ["paused"]


def test_deleting_a_persons_account_pauses_the_onedrive_folders_they_connected(
    org, other_org, alice, bob, tmp_path
):
    hers, elsewhere = onedrive(org, alice), onedrive(other_org, alice)
    his = onedrive(org, bob, folder_id="HIS")

    alice.delete()

    assert statuses(hers, elsewhere, his) == ["paused", "paused", "active"]
    hers.refresh_from_db()
    assert hers.created_by is None
    assert hers.status_reason == (
        "Paused: whoever connected it with their sign-in is no longer a member of Acme."
    )
    assert ConnectionEvent.objects.filter(connection=hers, action="paused").count() == 1
    # No one's sign-in: it is a former member's, connected again before it syncs.
    with pytest.raises(Conflict, match="connect it again with yours"):
        connection_resume(connection=hers, actor=Actor.of(user=bob))
    onedrive(org, bob)
    assert statuses(hers) == ["active"]


def test_deleting_the_membership_row_itself_pauses_their_connections_once(org, alice, tmp_path):
    hers = [local(org, tmp_path / "hers", alice), onedrive(org, alice)]

    Membership.objects.filter(organisation=org, user=alice).delete()

    assert statuses(*hers) == ["paused", "paused"]
    reason = "Paused: alice, who connected it, is no longer a member of Acme."
    for connection in hers:
        [event] = ConnectionEvent.objects.filter(connection=connection, action="paused")
        assert (event.actor, event.reason) == ("system", reason)
    # Back and removed again, through member_remove and its hook: nothing left to pause.
    member_add(organisation=org, username="alice", role="admin")
    assert member_remove(organisation=org, user=alice)
    assert ConnectionEvent.objects.filter(action="paused").count() == 2


def test_deleting_an_organisation_takes_its_connections_without_pausing_them(org, alice, tmp_path):
    local(org, tmp_path / "hers", alice), onedrive(org, alice)

    org.delete()

    assert not Connection.objects.exists() and not ConnectionEvent.objects.exists()


def test_removing_a_member_in_the_admin_pauses_their_connections(org, alice, tmp_path):
    connection = onedrive(org, alice)
    operator = operator_client(org)
    membership = Membership.objects.get(organisation=org, user=alice)
    rows = list(Membership.objects.filter(organisation=org).order_by("id"))
    form = {
        "slug": org.slug,
        "name": org.name,
        "page_limit": org.page_limit,
        "memberships-TOTAL_FORMS": str(len(rows)),
        "memberships-INITIAL_FORMS": str(len(rows)),
    }
    for n, row in enumerate(rows):
        form.update(
            {
                f"memberships-{n}-id": row.id,
                f"memberships-{n}-organisation": org.id,
                f"memberships-{n}-user": row.user_id,
                f"memberships-{n}-role": row.role,
            }
        )
        if row.id == membership.id:
            form[f"memberships-{n}-DELETE"] = "on"

    answer = operator.post(f"/admin/documents/organisation/{org.id}/change/", form)

    assert answer.status_code == 302, answer.content[:2000]
    assert not Membership.objects.filter(id=membership.id).exists()
    assert statuses(connection) == ["paused"]


def test_remove_member_command_pauses_their_connections(org, alice, tmp_path):
    connection = local(org, tmp_path / "hers", alice)
    out = StringIO()

    call_command("remove_member", org.slug, "alice", stdout=out)

    assert "alice is no longer a member of acme" in out.getvalue()
    assert statuses(connection) == ["paused"]
    assert User.objects.filter(username="alice").exists()
    with pytest.raises(CommandError, match="'alice' is not a member of acme"):
        call_command("remove_member", org.slug, "alice", stdout=StringIO())
