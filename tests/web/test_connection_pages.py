"""Members' pages for connected folders, the operator's admin for them, and where a
connector's run came from in the API and on the documents page."""

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command

from connectors.models import Connection, ConnectorImport
from connectors.services import connection_create_local
from documents.services.organisations import organisation_set_limit
from tests.support.files import make_pdf
from tests.support.folders import local_folder_fixtures, sync, write
from tests.support.pages import page_text
from tests.support.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)


_fast_settle, folder, connection = local_folder_fixtures("shared")


def imported(connection, folder, files: dict) -> list:
    for name, data in files.items():
        write(folder, name, data)
    sync(connection)
    return [drive(run_id) for run_id in sync(connection).counts.run_ids]


def test_a_member_sees_the_connection_its_failed_files_and_its_history(
    org, folder, connection, member_client
):
    organisation_set_limit(organisation=org, page_limit=3)
    imported(connection, folder, {"fits.pdf": make_pdf(2), "big/too-big.pdf": make_pdf(4)})
    sync(connection)

    listing = page_text(member_client.get("/connections/"))
    detail = page_text(member_client.get(f"/connections/{connection.id}/"))

    assert f"Local folder: {folder}" in listing
    assert "1 imported, 1 failed" in listing
    assert "File Why Actions big/too-big.pdf big/too-big.pdf has 4 pages" in detail
    assert "Raise the page limit and retry it" in detail
    assert "Syncs that found something" in detail and " OK 2 2 0 0" in detail


def test_the_last_sync_and_the_syncs_listed_tell_one_story(connection, member_client):
    # The folder is empty: the sync finds nothing new, and only moves the last sync's time.
    sync(connection)
    assert connection.last_sync_result == "ok" and not connection.syncs.exists()

    detail = page_text(member_client.get(f"/connections/{connection.id}/"))
    listing = page_text(member_client.get("/connections/"))

    # (page_text puts a space where the date's tag ends)
    when = f"{connection.last_sync_at:%Y-%m-%d %H:%M:%S}"
    assert f"Last sync {when} : OK" in detail and f"{when} : OK" in listing
    assert "No syncs yet" not in detail
    assert "None yet: every sync so far found nothing new." in detail


def test_a_failed_file_is_retried_from_the_connection_page_after_the_limit_is_raised(
    org, folder, connection, member_client
):
    organisation_set_limit(organisation=org, page_limit=1)
    [run] = imported(connection, folder, {"two.pdf": make_pdf(2)})
    assert run.error_code == "quota_exceeded"
    sync(connection)
    record = ConnectorImport.objects.get(file_id="two.pdf")
    organisation_set_limit(organisation=org, page_limit=5)

    response = member_client.post(f"/connections/{connection.id}/files/{record.id}/retry/")

    assert response.status_code == 302
    assert drive(run.id).status == "succeeded"
    sync(connection)
    assert connection.files_imported == 1 and connection.files_failed == 0


def test_members_pause_resume_and_ask_for_a_sync(connection, member_client):
    base = f"/connections/{connection.id}"

    member_client.post(f"{base}/pause/")
    connection.refresh_from_db()
    assert connection.status == "paused" and "alice" in connection.status_reason
    member_client.post(f"{base}/resume/")
    connection.refresh_from_db()
    assert connection.status == "active" and connection.status_reason == ""
    member_client.post(f"{base}/sync/")
    connection.refresh_from_db()
    assert connection.sync_requested_at is not None


def test_another_organisations_connection_is_not_shown_or_changed(
    other_org, tmp_path, member_client
):
    (tmp_path / "theirs").mkdir()
    theirs = connection_create_local(organisation=other_org, path=str(tmp_path / "theirs"))

    assert str(tmp_path / "theirs") not in page_text(member_client.get("/connections/"))
    assert member_client.get(f"/connections/{theirs.id}/").status_code == 404
    assert member_client.post(f"/connections/{theirs.id}/pause/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.status == "active"


def test_only_staff_connect_a_folder_of_the_server(org, folder, member_client, operator):
    refused = member_client.post("/connections/local/", {"path": str(folder)})
    assert refused.status_code == 403
    assert "Folder on this server" not in page_text(member_client.get("/connections/"))

    made = operator.post("/connections/local/", {"path": str(folder)})

    assert made.status_code == 302
    assert Connection.objects.get(organisation=org).folder_id == str(folder.resolve())
    missing = operator.post("/connections/local/", {"path": str(folder / "nope")}, follow=True)
    assert "is not a folder" in page_text(missing)


def test_staff_without_the_permission_to_add_connections_cannot_connect_a_folder(
    org, folder, member_client
):
    alice = User.objects.get(username="alice")
    alice.is_staff = True
    alice.save(update_fields=["is_staff"])

    refused = member_client.post("/connections/local/", {"path": str(folder)})

    assert refused.status_code == 403
    assert not Connection.objects.exists()
    assert "Folder on this server" not in page_text(member_client.get("/connections/"))


def test_connect_folder_command_makes_a_local_connection(org, folder):
    from io import StringIO

    out = StringIO()
    call_command("connect_folder", org.slug, str(folder), stdout=out)

    connection = Connection.objects.get(organisation=org)
    assert (connection.provider, connection.folder_path) == ("local", str(folder.resolve()))
    assert f"connection {connection.id}" in out.getvalue()


def test_a_connector_run_says_where_its_file_came_from(org, folder, connection, api, member_client):
    [run] = imported(connection, folder, {"in/report.pdf": make_pdf(1)})

    body = api.get(f"/api/v1/runs/{run.id}").json()
    document = api.get(f"/api/v1/documents/{run.document_id}").json()

    assert body["source"] == "connector"
    assert body["connector"] == {
        "connection_id": connection.id,
        "provider": "local",
        "path": "in/report.pdf",
        "folder": str(folder.resolve()),
        "content_version": run.connector_import.content_version,
    }
    assert document["connector"]["path"] == "in/report.pdf"
    assert document["deleted_at_source"] is None
    assert "from Local folder: in/report.pdf" in page_text(member_client.get("/"))


def test_the_admin_shows_cursor_error_history_and_acts(org, folder, connection, operator):
    imported(connection, folder, {"a.pdf": make_pdf(1)})
    folder.rename(folder.with_name("gone"))
    sync(connection)
    page = f"/admin/connectors/connection/{connection.id}/change/"

    text = page_text(operator.get(page))

    assert '"files"' in operator.get(page).content.decode().replace("&quot;", '"')
    assert "does not exist" in text  # last error
    assert "Recent syncs" in text and "failed" in text
    response = operator.post(
        "/admin/connectors/connection/",
        {"action": "pause", "_selected_action": [connection.id]},
    )
    assert response.status_code == 302
    connection.refresh_from_db()
    assert connection.status == "paused" and "operator olga" in connection.status_reason
    operator.post(
        "/admin/connectors/connection/",
        {"action": "resume", "_selected_action": [connection.id]},
    )
    connection.refresh_from_db()
    assert connection.status == "active"


def test_the_run_page_in_the_admin_shows_the_connector_source(folder, connection, operator):
    [run] = imported(connection, folder, {"deep/x.pdf": make_pdf(1)})

    text = page_text(operator.get(f"/admin/pipeline/importrun/{run.id}/change/"))

    assert "Local folder: deep/x.pdf" in text
