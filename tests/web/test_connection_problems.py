"""A sync's failure as members read it (plain words for each kind of problem) and as
operators read it (the technical message, in the admin), against a local Graph and real
local folders."""

import pytest

from connectors.services import connection_create_local
from connectors.sync import connection_sync
from tests.connectors.signers import connected
from tests.support.folders import sync
from tests.support.graph_server import graph_fixture
from tests.support.pages import page_text
from tests.support.processes import free_port

pytestmark = pytest.mark.django_db(transaction=True)

graph = graph_fixture()


def pages(client, connection) -> str:
    listing = page_text(client.get("/connections/"))
    detail = page_text(client.get(f"/connections/{connection.id}/"))
    return f"{listing}\n{detail}"


def admin_page(operator, connection) -> str:
    return page_text(operator.get(f"/admin/connectors/connection/{connection.id}/change/"))


def seen_by_both(connection, member_client, operator, *, plain: str, technical: str) -> None:
    member, admin = pages(member_client, connection), admin_page(operator, connection)
    assert plain in member, member
    assert technical not in member
    assert technical in admin


def test_revoked_consent_tells_members_to_connect_again(graph, org, member_client, operator):
    connection = connected(graph, org)
    graph.revoke_consent()

    sync(connection)

    assert connection.status == "needs_reconnect"
    seen_by_both(
        connection,
        member_client,
        operator,
        plain="has expired or was withdrawn: connect the folder again",
        technical="(invalid_grant)",
    )


@pytest.mark.parametrize("status", [429, 503])
def test_a_throttled_graph_says_it_is_busy_and_will_try_again(
    graph, org, status, member_client, operator
):
    connection = connected(graph, org)
    graph.fail_next(1, status=status, retry_after=600)

    outcome = sync(connection)

    assert outcome.sync.result == "busy" and outcome.sync.problem == "provider_unavailable"
    seen_by_both(
        connection,
        member_client,
        operator,
        plain="OneDrive is busy or cannot be reached just now",
        technical=f"({status})",
    )


def test_an_unreachable_graph_says_it_cannot_be_reached(
    graph, org, settings, member_client, operator
):
    connection = connected(graph, org)
    settings.PAPERLANE_ONEDRIVE_GRAPH_URL = f"http://127.0.0.1:{free_port()}/v1.0"

    sync(connection)

    assert connection.status == "error" and connection.last_problem == "provider_unavailable"
    seen_by_both(
        connection,
        member_client,
        operator,
        plain="OneDrive is busy or cannot be reached just now",
        technical="Could not reach OneDrive",
    )


def test_an_unexpected_answer_tells_members_to_try_later_and_operators_what(
    graph, org, member_client, operator
):
    connection = connected(graph, org)
    graph.fail_next(1, status=400, only="delta")

    sync(connection)

    assert connection.status == "error" and connection.last_problem == "unknown"
    seen_by_both(
        connection,
        member_client,
        operator,
        plain="It will be tried again later; operators have the details.",
        technical="OneDrive answered 400",
    )


def test_a_local_folder_gone_says_so_and_a_refused_one_pauses(
    org, tmp_path, settings, member_client, operator
):
    folder = tmp_path / "scans"
    folder.mkdir()
    connection = connection_create_local(organisation=org, path=str(folder))
    folder.rename(tmp_path / "elsewhere")

    sync(connection)

    assert connection.status == "error" and connection.last_problem == "folder_missing"
    seen_by_both(
        connection,
        member_client,
        operator,
        plain="The folder is gone or can no longer be read",
        technical="does not exist",
    )
    (tmp_path / "elsewhere").rename(folder)
    settings.PAPERLANE_LOCAL_FOLDER_ROOTS = [str(tmp_path / "other")]

    sync(connection)

    assert (connection.status, connection.last_problem) == ("paused", "folder_refused")
    seen_by_both(
        connection,
        member_client,
        operator,
        plain="This server is not allowed to read this folder",
        technical="outside the folders this server may read",
    )
    # Paused: nothing is tried again until an operator allows it and a person resumes.
    assert connection_sync(connection=connection) is None


def test_failures_in_a_row_pause_with_the_plain_reason(
    org, tmp_path, member_client, operator, monkeypatch
):
    monkeypatch.setattr("connectors.sync.MAX_FAILURES", 2)
    folder = tmp_path / "scans"
    folder.mkdir()
    connection = connection_create_local(organisation=org, path=str(folder))
    folder.rmdir()

    sync(connection), sync(connection)

    assert connection.status == "paused"
    assert connection.status_reason.startswith("Paused after 2 failed syncs in a row. The folder")
    seen_by_both(
        connection,
        member_client,
        operator,
        plain="Paused after 2 failed syncs in a row",
        technical="does not exist",
    )
