"""Disconnecting a connection from its page (a POST with its CSRF token): the tokens
and OneDrive's subscription go, the documents stay, nothing more is synced or fetched,
the history says who did it; connecting the same folder again brings it back."""

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from connectors.loop import connectors_maintain
from connectors.models import Connection, ConnectionEvent, ConnectorImport
from connectors.services import (
    SYSTEM,
    connection_create_local,
    connection_disconnect,
    connection_request_sync,
)
from connectors.sync import (
    SyncLeaseLost,
    connection_claim_sync,
    connection_refresh_imports,
    connection_save_cursor,
    connection_sync,
)
from core.errors import Forbidden
from documents.models import Document
from documents.services.organisations import member_add
from pipeline.services.transitions import Actor
from tests.connectors.signers import connected
from tests.support.files import make_pdf
from tests.support.folders import sync, write
from tests.support.graph_server import graph_fixture
from tests.support.pages import page_text
from tests.support.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)

graph = graph_fixture()


@pytest.fixture(autouse=True)
def _fast_settle(monkeypatch):
    monkeypatch.setattr("connectors.local.STABLE_SECONDS", 0)


def signed_in(username: str, organisation, role: str = "admin") -> Client:
    """A browser of someone with `role` (an admin's, by default: connections are theirs
    to manage): CSRF is checked as in production."""
    member_add(organisation=organisation, username=username, password="pass-word-1234", role=role)
    client = Client(enforce_csrf_checks=True)
    assert client.login(username=username, password="pass-word-1234")
    return client


def csrf_post(client: Client, page: str, action: str):
    """Open `page` and submit its form to `action`, as a browser does."""
    html = client.get(page).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    assert f'action="{action}"' in html
    return client.post(action, {"csrfmiddlewaretoken": token})


def test_an_admin_disconnects_onedrive_its_tokens_and_subscription_go_documents_stay(
    graph, org, settings
):
    settings.PAPERLANE_ONEDRIVE_NOTIFICATION_URL = "https://paperlane.example/notify"
    graph.state.validate_notification_url = False
    graph.put("Contracts/a.pdf", make_pdf(2))
    connection = connected(graph, org)
    for run_id in connection_sync(connection=connection).counts.run_ids:
        assert drive(run_id).status == "succeeded"
    connectors_maintain()  # makes the change-notification subscription
    assert len(graph.state.subscriptions) == 1
    alice = signed_in("alice", org)
    detail = f"/connections/{connection.id}/"
    assert "Disconnect…" in page_text(alice.get(detail))

    answer = csrf_post(alice, f"{detail}disconnect/", f"{detail}disconnect/")

    assert answer.status_code == 302 and answer["Location"] == detail
    connection.refresh_from_db()
    assert connection.status == "disconnected" and connection.credentials_encrypted == ""
    assert "subscription" not in connection.provider_state
    assert graph.state.subscriptions == {}
    document = Document.objects.get(organisation=org)
    assert document.deleted_at is None and document.page_count == 2
    assert ConnectorImport.objects.get(connection=connection).state == "imported"
    event = ConnectionEvent.objects.get(connection=connection, action="disconnected")
    assert (event.user.username, event.status_before, event.status_after) == (
        "alice",
        "active",
        "disconnected",
    )
    assert "change notifications were stopped" in event.reason
    page = page_text(alice.get(detail))
    assert "Disconnected" in page and "Disconnected by alice; its documents stay." in page
    assert "Disconnect…" not in page and "Sync now" not in page
    assert "Disconnected alice Active → Disconnected Its change notifications" in page
    # Nothing brings it back by itself: no sync, no upkeep, no notification.
    assert connection_sync(connection=connection) is None
    connectors_maintain()
    connection.refresh_from_db()
    assert connection.status == "disconnected"
    assert not connection_request_sync(connection_id=connection.id, actor=SYSTEM)
    # Disconnecting again changes nothing.
    assert "already disconnected" in page_text(alice.get(f"{detail}disconnect/"))
    token = alice.cookies["csrftoken"].value
    assert alice.post(f"{detail}disconnect/", {"csrfmiddlewaretoken": token}).status_code == 302
    assert ConnectionEvent.objects.filter(action="disconnected").count() == 1


def test_disconnecting_takes_a_post_with_the_csrf_token(org, tmp_path):
    (tmp_path / "scans").mkdir()
    connection = connection_create_local(organisation=org, path=str(tmp_path / "scans"))
    alice = signed_in("alice", org)
    url = f"/connections/{connection.id}/disconnect/"

    shown = page_text(alice.get(url))
    forged = alice.post(url, {})

    assert "The documents already imported stay" in shown
    assert forged.status_code == 403
    connection.refresh_from_db()
    assert connection.status == "active"


def test_a_plain_member_cannot_disconnect_by_any_door(org, tmp_path):
    (tmp_path / "scans").mkdir()
    connection = connection_create_local(organisation=org, path=str(tmp_path / "scans"))
    max_ = signed_in("max", org, role="member")
    url = f"/connections/{connection.id}/disconnect/"
    detail = page_text(max_.get(f"/connections/{connection.id}/"))
    token = max_.cookies["csrftoken"].value

    shown = max_.get(url)
    posted = max_.post(url, {"csrfmiddlewaretoken": token})

    assert "Disconnect…" not in detail
    assert shown.status_code == posted.status_code == 403
    assert "You have the member role: only admins may" in page_text(posted)
    with pytest.raises(Forbidden):
        connection_disconnect(
            connection=connection, actor=Actor.of(user=User.objects.get(username="max"))
        )
    connection.refresh_from_db()
    assert connection.status == "active"
    assert not ConnectionEvent.objects.filter(action="disconnected").exists()


def test_another_organisations_member_cannot_disconnect_by_any_door(org, other_org, tmp_path):
    (tmp_path / "scans").mkdir()
    connection = connection_create_local(organisation=org, path=str(tmp_path / "scans"))
    outsider = signed_in("mallory", other_org)
    url = f"/connections/{connection.id}/disconnect/"

    # As unknown as a connection that never was; a POST has no page to take a CSRF
    # token from, and is refused before the view (the test above).
    assert outsider.get(url).status_code == 404
    mallory = User.objects.get(username="mallory")
    with pytest.raises(Forbidden):
        connection_disconnect(connection=connection, actor=Actor.of(user=mallory))
    connection.refresh_from_db()
    assert connection.status == "active"


def test_files_listed_before_the_disconnect_are_not_fetched_after_it(org, tmp_path):
    folder = tmp_path / "scans"
    write(folder, "late.pdf", make_pdf(1))
    connection = connection_create_local(organisation=org, path=str(folder))
    sync(connection)
    [run_id] = sync(connection).counts.run_ids

    connection_disconnect(connection=connection, actor=Actor("user:test"))
    run = drive(run_id)

    assert (run.status, run.error_code) == ("failed", "connection_disconnected")
    assert not Document.objects.exists()
    connection_refresh_imports(connection=connection)
    record = ConnectorImport.objects.get(file_id="late.pdf")
    assert record.state == "skipped" and "disconnected" in record.reason
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (0, 0)


def test_connecting_the_same_folder_again_brings_it_back_without_importing_twice(
    org, tmp_path, operator
):
    folder = tmp_path / "scans"
    write(folder, "a.pdf", make_pdf(1))
    connection = connection_create_local(organisation=org, path=str(folder))
    sync(connection)
    [run_id] = sync(connection).counts.run_ids
    assert drive(run_id).status == "succeeded"
    operator.post(
        "/admin/connectors/connection/",
        {"action": "disconnect", "_selected_action": [connection.id]},
    )
    connection.refresh_from_db()
    assert connection.status == "disconnected"

    again = operator.post("/connections/local/", {"path": str(folder)})

    assert again["Location"] == f"/connections/{connection.id}/"
    connection.refresh_from_db()
    assert connection.status == "active"
    assert sync(connection).counts.run_ids == [] and sync(connection).counts.run_ids == []
    actions = list(
        ConnectionEvent.objects.filter(connection=connection)
        .order_by("at", "id")
        .values_list("action", "actor")
    )
    assert actions == [
        ("connected", "system"),
        ("disconnected", "user:olga"),
        ("reconnected", "user:olga"),
    ]
    assert Connection.objects.count() == 1
    assert "Connected by olga " in page_text(operator.get(f"/connections/{connection.id}/"))


def test_a_sync_running_when_it_is_disconnected_records_nothing_more(org, tmp_path):
    (tmp_path / "scans").mkdir()
    connection = connection_create_local(organisation=org, path=str(tmp_path / "scans"))
    assert connection_claim_sync(connection_id=connection.id, owner="host.1") is not None

    connection_disconnect(connection=connection, actor=Actor("user:test"))

    with pytest.raises(SyncLeaseLost):
        connection_save_cursor(connection=connection, owner="host.1", cursor="{}")
    connection.refresh_from_db()
    assert (connection.sync_owner, connection.cursor) == ("", "")
