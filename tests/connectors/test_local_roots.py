"""Which folders of the server a local connection may read (PAPERLANE_LOCAL_FOLDER_ROOTS),
checked with real folders and links when connecting, at every sync and every download."""

import os
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command

import config.settings as shipped
from connectors.base import FolderRefused
from connectors.local import LocalFolderProvider
from connectors.models import Connection, ConnectorImport
from connectors.services import SYSTEM, connection_create_local, connection_resume
from connectors.sync import connection_refresh_imports, connection_sync
from core.errors import InvalidUpload
from documents.models import Document
from pipeline.models import ImportRun
from tests.support.files import make_pdf
from tests.support.folders import sync, write
from tests.support.pages import page_text
from tests.support.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _fast_settle(monkeypatch):
    monkeypatch.setattr("connectors.local.STABLE_SECONDS", 0)


@pytest.fixture
def root(tmp_path, settings):
    """The one folder this server may read: tmp_path/root."""
    path = tmp_path / "root"
    path.mkdir()
    settings.PAPERLANE_LOCAL_FOLDER_ROOTS = [str(path)]
    return path


def refused(org, path) -> str:
    with pytest.raises(InvalidUpload) as caught:
        connection_create_local(organisation=org, path=str(path))
    assert caught.value.code == "folder_not_allowed"
    return caught.value.message


def test_no_local_folder_is_read_until_an_operator_names_roots(org, tmp_path, settings):
    assert shipped.PAPERLANE_LOCAL_FOLDER_ROOTS == []
    settings.PAPERLANE_LOCAL_FOLDER_ROOTS = []
    (tmp_path / "scans").mkdir()

    assert "PAPERLANE_LOCAL_FOLDER_ROOTS" in refused(org, tmp_path / "scans")
    assert not Connection.objects.exists()


def test_a_folder_outside_every_root_is_refused_before_it_is_looked_at(org, tmp_path, root):
    (tmp_path / "beside").mkdir()

    for path in ("/etc", "/", tmp_path / "beside", root / ".." / "beside", "/no/such/folder"):
        assert "outside the folders this server may read" in refused(org, path)
    (root / "scans").mkdir()
    assert connection_create_local(organisation=org, path=str(root / "scans")).folder_id == str(
        (root / "scans").resolve()
    )


def test_stored_documents_and_the_project_are_refused_even_under_a_root(org, tmp_path, settings):
    settings.PAPERLANE_LOCAL_FOLDER_ROOTS = ["/"]
    media = Path(django_settings.MEDIA_ROOT)
    (media / "acme").mkdir(parents=True)

    assert "stored documents (MEDIA_ROOT)" in refused(org, media)
    assert "inside Paperlane's stored documents" in refused(org, media / "acme")
    # A folder holding the originals would import them too.
    assert "holds Paperlane's stored documents" in refused(org, tmp_path)
    assert "holds Paperlane's" in refused(org, "/")
    base = Path(django_settings.BASE_DIR)
    assert "Paperlane's own installation" in refused(org, base)
    assert "Paperlane's own installation" in refused(org, base / "docs")
    assert "Python environment" in refused(org, os.path.realpath(base / ".venv"))
    assert "static files" in refused(org, base / "static")


def test_only_a_root_named_beneath_the_project_opens_a_folder_in_it(org, tmp_path, settings):
    project = tmp_path / "project"
    (project / "docs").mkdir(parents=True)
    (project / "inbox" / "scans").mkdir(parents=True)
    settings.BASE_DIR = project
    settings.PAPERLANE_LOCAL_FOLDER_ROOTS = [str(tmp_path)]

    assert "inside Paperlane's own installation" in refused(org, project / "inbox")
    settings.PAPERLANE_LOCAL_FOLDER_ROOTS = [str(project)]
    assert "inside Paperlane's own installation" in refused(org, project / "docs")
    settings.PAPERLANE_LOCAL_FOLDER_ROOTS = [str(tmp_path), str(project / "inbox")]

    connection = connection_create_local(organisation=org, path=str(project / "inbox" / "scans"))

    assert connection.folder_id == str(project / "inbox" / "scans")
    assert "inside Paperlane's own installation" in refused(org, project / "docs")


def test_a_link_is_followed_once_and_where_it_leads_is_checked(org, tmp_path, root):
    (tmp_path / "outside").mkdir()
    (root / "real").mkdir()
    (root / "to-outside").symlink_to(tmp_path / "outside", target_is_directory=True)
    (root / "to-real").symlink_to(root / "real", target_is_directory=True)
    (root / "to-etc").symlink_to("/etc", target_is_directory=True)

    assert "outside the folders" in refused(org, root / "to-outside")
    assert "outside the folders" in refused(org, root / "to-etc")
    connection = connection_create_local(organisation=org, path=str(root / "to-real"))

    assert connection.folder_id == connection.folder_path == str(root / "real")


def test_a_folder_swapped_for_a_link_later_is_refused_at_the_next_sync(org, tmp_path, root):
    scans = root / "scans"
    write(scans, "mine.pdf", make_pdf(1))
    connection = connection_create_local(organisation=org, path=str(scans))
    outside = tmp_path / "outside"
    write(outside, "secret.pdf", make_pdf(2))
    write(root / "elsewhere", "also.pdf", make_pdf(1))
    scans.rename(root / "moved-away")

    for target in (outside, root / "elsewhere"):  # out of the roots, or inside them
        scans.symlink_to(target, target_is_directory=True)
        outcome = sync(connection)
        with pytest.raises(FolderRefused):
            LocalFolderProvider().open(connection, "secret.pdf")
        scans.unlink()

        assert outcome.sync.result == "failed" and outcome.counts.seen == 0
        assert "link" in connection.last_error
        # Refused: paused at once, not asked again and again.
        assert connection.status == "paused" and connection_sync(connection=connection) is None
        connection_resume(connection=connection, actor=SYSTEM)
    assert not ConnectorImport.objects.exists() and not ImportRun.objects.exists()


def test_a_folder_above_the_connected_one_swapped_for_a_link_is_not_followed(org, tmp_path, root):
    write(root / "team" / "scans", "mine.pdf", make_pdf(1))
    connection = connection_create_local(organisation=org, path=str(root / "team" / "scans"))
    write(tmp_path / "outside" / "scans", "secret.pdf", make_pdf(1))
    (root / "team").rename(root / "team-before")
    (root / "team").symlink_to(tmp_path / "outside", target_is_directory=True)

    assert sync(connection).sync.result == "failed"
    assert "link" in connection.last_error
    with pytest.raises(OSError):
        LocalFolderProvider.open_path(connection.folder_id, "secret.pdf")


def test_a_hard_link_to_a_file_outside_the_folder_is_not_read_and_says_why(
    org, tmp_path, root, member_client
):
    scans = root / "scans"
    write(scans, "mine.pdf", make_pdf(1))
    secret = write(tmp_path / "outside", "secret.pdf", make_pdf(2, label="secret"))
    os.link(secret, scans / "secret.pdf")
    connection = connection_create_local(organisation=org, path=str(scans))
    read_before = secret.stat().st_atime_ns

    sync(connection)
    [run_id] = sync(connection).counts.run_ids

    assert drive(run_id).document.filename == "mine.pdf"
    linked = ConnectorImport.objects.get(path="secret.pdf")
    assert (linked.state, linked.run_id, linked.document_id) == ("failed", None, None)
    assert "hard link" in linked.reason
    assert "hard link" in page_text(member_client.get(f"/connections/{connection.id}/"))
    assert sync(connection).counts.seen == 0  # reported once
    assert secret.stat().st_atime_ns == read_before

    secret.unlink()  # now the folder's own file, linked nowhere else
    sync(connection)
    [own] = sync(connection).counts.run_ids

    assert drive(own).document.filename == "secret.pdf"


def test_a_file_swapped_for_a_hard_link_after_it_was_listed_is_not_fetched(org, tmp_path, root):
    scans = root / "scans"
    write(scans, "a.pdf", make_pdf(1))
    secret = write(tmp_path / "outside", "secret.pdf", make_pdf(2, label="secret"))
    connection = connection_create_local(organisation=org, path=str(scans))
    sync(connection)
    [run_id] = sync(connection).counts.run_ids
    (scans / "a.pdf").unlink()
    os.link(secret, scans / "a.pdf")

    run = drive(run_id)

    assert (run.status, run.error_code) == ("failed", "download_refused")
    assert "hard link" in run.error_message
    assert not Document.objects.filter(sha256__gt="").exists()


def test_a_root_taken_away_stops_syncs_and_the_downloads_of_runs_queued(org, root, settings):
    scans = root / "scans"
    write(scans, "a.pdf", make_pdf(1))
    connection = connection_create_local(organisation=org, path=str(scans))
    sync(connection)
    [run_id] = sync(connection).counts.run_ids
    settings.PAPERLANE_LOCAL_FOLDER_ROOTS = [str(root / "other")]

    run = drive(run_id)
    outcome = sync(connection)

    assert (run.status, run.error_code) == ("failed", "folder_refused")
    assert outcome.sync.result == "failed"
    assert "outside the folders this server may read" in connection.last_error


def test_members_read_a_refused_folder_plainly_never_the_servers_folders(
    org, tmp_path, root, settings, member_client, api, operator
):
    scans = root / "scans"
    write(scans, "a.pdf", make_pdf(1))
    connection = connection_create_local(organisation=org, path=str(scans))
    sync(connection)
    [run_id] = sync(connection).counts.run_ids
    others = [str(tmp_path / "other-root"), "/srv/another-organisations-share"]
    settings.PAPERLANE_LOCAL_FOLDER_ROOTS = others

    run = drive(run_id)
    sync(connection)
    connection_refresh_imports(connection=connection)

    assert (run.status, run.error_code) == ("failed", "folder_refused")
    assert run.error_message == (
        "a.pdf was not imported. This server is not allowed to read this folder (any more); "
        "an operator must allow it before it syncs again."
    )
    seen_by_members = [
        run.error_message,
        ConnectorImport.objects.get(run_id=run_id).reason,
        page_text(member_client.get("/connections/")),
        page_text(member_client.get(f"/connections/{connection.id}/")),
        api.get(f"/api/v1/runs/{run_id}").content.decode(),
    ]
    assert "This server is not allowed to read this folder" in seen_by_members[3]
    installation = os.path.realpath(django_settings.BASE_DIR)
    for shown in seen_by_members:
        for path in [*others, installation, django_settings.MEDIA_ROOT]:
            assert path not in shown, shown
    # Operators read why, with the roots, in the admin.
    admin = page_text(operator.get(f"/admin/connectors/connection/{connection.id}/change/"))
    assert all(path in admin for path in others)


def test_the_operator_connecting_is_told_why_without_the_servers_other_folders(
    org, tmp_path, root, settings
):
    settings.PAPERLANE_LOCAL_FOLDER_ROOTS = [str(root), "/srv/another-organisations-share"]
    installation = os.path.realpath(django_settings.BASE_DIR)

    outside = refused(org, "/etc")
    settings.PAPERLANE_LOCAL_FOLDER_ROOTS = ["/"]
    holds_installation = refused(org, "/")
    holds_media = refused(org, tmp_path)

    assert outside == (
        "/etc is outside the folders this server may read (PAPERLANE_LOCAL_FOLDER_ROOTS)."
    )
    assert holds_installation == ("/ holds Paperlane's own installation, which is never connected.")
    assert "holds Paperlane's stored documents (MEDIA_ROOT)" in holds_media
    for message in (outside, holds_installation, holds_media):
        assert "another-organisations-share" not in message and str(root) not in message
        assert installation not in message
        assert django_settings.MEDIA_ROOT not in message


def test_connect_folder_says_in_plain_words_why_a_folder_is_refused(org, tmp_path, settings):
    settings.PAPERLANE_LOCAL_FOLDER_ROOTS = [str(tmp_path)]
    with pytest.raises(CommandError, match="outside the folders this server may read"):
        call_command("connect_folder", org.slug, "/etc", stdout=StringIO())
    with pytest.raises(CommandError, match="stored documents"):
        call_command("connect_folder", org.slug, django_settings.MEDIA_ROOT, stdout=StringIO())
    assert not Connection.objects.exists()


def test_the_connect_page_says_why_a_folder_is_refused(org, root, operator):
    answer = operator.post("/connections/local/", {"path": "/etc"}, follow=True)

    assert "/etc is outside the folders this server may read" in page_text(answer)
    assert not Connection.objects.exists()
