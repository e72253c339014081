"""OneDrive against a local Graph (tests/support/graph_server.py) with the real sync,
the real stages and the real database: what is imported, once, and what Graph's
failures (410, 429/503, expired tokens, revoked consent) do."""

import hashlib
import signal
import subprocess
import sys
import time

import pytest

from connectors.models import Connection, ConnectorImport
from connectors.onedrive import OneDriveProvider
from connectors.services import connection_credentials
from connectors.sync import connection_record_page, connection_sync
from core.secrets import credentials_decrypt
from documents.models import Document, UsageEntry
from pipeline.errors import PermanentError
from pipeline.models import ImportRun
from tests.connectors.signers import connected
from tests.support.files import make_docx, make_pdf
from tests.support.graph_server import graph_env, graph_fixture
from tests.support.pipeline import running_workers, wait_for, wait_terminal
from tests.support.processes import ROOT, process_env
from tests.support.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)


graph = graph_fixture()


@pytest.fixture
def drive_files(graph):
    """A drive with the connected folder /Contracts and things around it."""
    ids = {
        "a": graph.put("Contracts/a.pdf", make_pdf(2, label="alpha")),
        "b": graph.put("Contracts/2024/b.docx", make_docx(3)),
        "c": graph.put("Contracts/2024/deep/c.pdf", make_pdf(1, label="gamma")),
        "notes": graph.put("Contracts/notes.txt", b"not a document"),
        "fake": graph.put("Contracts/photo.pdf", b"\x89PNG", mime="image/png"),
        "outside": graph.put("Other/outside.pdf", make_pdf(1, label="outside")),
        "root": graph.put("top.pdf", make_pdf(1, label="top")),
    }
    # Two items a page: the listing spans many pages; `a` is listed twice.
    graph.state.page_size = 2
    graph.state.repeat.add(ids["a"])
    return ids


def runs(connection) -> list[ImportRun]:
    return list(
        ImportRun.objects.filter(connector_import__connection=connection).order_by("created_at")
    )


def imported_paths(connection) -> list[str]:
    return sorted(r.connector_import.path for r in runs(connection))


def sync(connection):
    outcome = connection_sync(connection=connection)
    assert outcome is not None
    return outcome


def imported(graph, org):
    """The organisation's connection to the test drive's /Contracts, synced once and
    every file it found processed."""
    connection = connected(graph, org)
    sync(connection)
    for run in runs(connection):
        drive(run.id)
    return connection


def test_every_supported_file_under_the_folder_is_imported_once(graph, org, drive_files):
    connection = connected(graph, org)

    outcome = sync(connection)

    assert outcome.sync.result == "ok", outcome.sync.error
    assert imported_paths(connection) == [
        "/Contracts/2024/b.docx",
        "/Contracts/2024/deep/c.pdf",
        "/Contracts/a.pdf",
    ]
    # The text file is recorded as skipped (people see why); the PNG named .pdf, the
    # files outside the folder and the folders themselves are not recorded at all.
    recorded = dict(
        ConnectorImport.objects.filter(connection=connection).values_list("name", "state")
    )
    assert recorded == {
        "a.pdf": "queued",
        "b.docx": "queued",
        "c.pdf": "queued",
        "notes.txt": "skipped",
    }
    for run in runs(connection):
        assert drive(run.id).status == "succeeded"
    pages = dict(Document.objects.filter(organisation=org).values_list("filename", "page_count"))
    assert (
        pages["a.pdf"] == 2 and pages["c.pdf"] == 1 and set(pages) == {"a.pdf", "b.docx", "c.pdf"}
    )
    connection.refresh_from_db()
    assert connection.cursor.startswith(graph.graph_url) and "token=" in connection.cursor


def test_replaying_every_page_twice_creates_no_extra_run(graph, org, drive_files):
    connection = connected(graph, org)
    provider = OneDriveProvider()

    pages = list(provider.changes(connection, None))
    assert len(pages) > 3 and [p.cursor is None for p in pages] == [True] * (len(pages) - 1) + [
        False
    ]
    for page in pages + pages:
        connection_record_page(connection=connection, page=page)
    first = len(runs(connection))
    # A whole listing again from nothing, then from its own delta link, twice each.
    for cursor in (None, None, pages[-1].cursor, pages[-1].cursor):
        for page in provider.changes(connection, cursor):
            connection_record_page(connection=connection, page=page)

    assert first == 3
    assert len(runs(connection)) == 3


def test_only_the_changes_since_the_cursor_are_listed(graph, org, drive_files):
    connection = connected(graph, org)
    sync(connection)
    graph.put("Contracts/new.pdf", make_pdf(1, label="new"))
    graph.put("Other/elsewhere.pdf", make_pdf(1, label="elsewhere"))
    before = len(graph.state.requests)

    outcome = sync(connection)

    assert outcome.counts.started == 1
    assert imported_paths(connection)[-1] == "/Contracts/new.pdf"
    delta_calls = [p for _, p in graph.state.requests[before:] if "/root/delta" in p]
    assert all("token=" in p or "page=" in p for p in delta_calls)


def test_an_edited_file_becomes_a_new_version_and_a_rename_does_not(graph, org, drive_files):
    connection = imported(graph, org)
    document = Document.objects.get(organisation=org, filename="a.pdf")

    graph.rename(drive_files["a"], "a.pdf")  # metadata only: eTag changes, cTag does not
    assert sync(connection).counts.started == 0
    graph.put("Contracts/a.pdf", make_pdf(5, label="alpha two"))
    outcome = sync(connection)

    assert outcome.counts.started == 1
    edited = ImportRun.objects.get(id=outcome.counts.run_ids[0])
    assert drive(edited.id).status == "succeeded"
    document.refresh_from_db()
    assert (document.version, document.page_count) == (2, 5)
    charged = UsageEntry.objects.filter(document=document).order_by("document_version")
    assert [(u.document_version, u.pages) for u in charged] == [(1, 2), (2, 5)]


def test_a_name_an_upload_would_refuse_fails_with_why_and_imports_once_renamed(graph, org):
    connection = connected(graph, org)
    bad = {
        graph.put("Contracts/nul\x00.pdf", make_pdf(1)): "nul\\x00.pdf",
        graph.put("Contracts/rtl\u202eFDP.exe.pdf", make_pdf(1)): "rtl\\u202eFDP.exe.pdf",
        graph.put("Contracts/" + "y" * 300 + ".pdf", make_pdf(1)): "y" * 255,
    }
    graph.put("Contracts/good.pdf", make_pdf(1))

    outcome = sync(connection)

    assert (outcome.sync.result, outcome.counts.started) == ("ok", 1)
    refused = {r.file_id: r for r in ConnectorImport.objects.filter(state="failed")}
    assert {i: r.name for i, r in refused.items()} == bad
    assert all(r.run_id is None and "rename the file" in r.reason for r in refused.values())
    assert Document.objects.count() == 0  # good.pdf's is made by its run
    first = next(iter(bad))
    graph.rename(first, "fixed.pdf")  # metadata only: the version stays

    renamed = sync(connection)

    assert renamed.counts.started == 1
    run = drive(renamed.counts.run_ids[0])
    assert (run.status, run.document.filename) == ("succeeded", "fixed.pdf")
    assert sync(connection).counts.started == 0


def test_on_onedrive_for_business_the_content_hash_stands_in_for_the_missing_ctag(
    graph, org, drive_files
):
    graph.state.drive_type = "business"
    connection = connected(graph, org)
    sync(connection)
    a = ConnectorImport.objects.get(connection=connection, name="a.pdf")
    assert a.content_version.startswith("quickXorHash:")

    graph.rename(drive_files["a"], "a.pdf")
    assert sync(connection).counts.started == 0
    graph.put("Contracts/a.pdf", make_pdf(3, label="alpha edited"))
    assert sync(connection).counts.started == 1


def test_on_onedrive_for_business_a_file_back_to_an_earlier_content_is_imported_again(
    graph, org, drive_files
):
    graph.state.drive_type = "business"
    connection = imported(graph, org)
    one, two = make_pdf(4, label="alpha one"), make_pdf(5, label="alpha two")

    for data in (one, two, one):
        graph.put("Contracts/a.pdf", data)
        [run_id] = sync(connection).counts.run_ids
        assert drive(run_id).status == "succeeded"
    assert sync(connection).counts.started == 0

    document = Document.objects.get(organisation=org, filename="a.pdf")
    assert (document.version, document.page_count) == (4, 4)
    assert document.sha256 == hashlib.sha256(one).hexdigest()
    charged = UsageEntry.objects.filter(document=document).order_by("document_version")
    assert [(u.document_version, u.pages) for u in charged] == [(1, 2), (2, 4), (3, 5), (4, 4)]


def test_a_file_moved_out_and_back_is_searchable_again_and_charged_once(graph, org, drive_files):
    connection = imported(graph, org)
    document = Document.objects.get(organisation=org, filename="c.pdf")
    chunks = document.chunk_count
    assert chunks > 0

    graph.move(drive_files["c"], "Other")
    assert sync(connection).counts.deleted == 1
    graph.move(drive_files["c"], "Contracts/2024/deep")
    back = sync(connection)

    assert back.counts.started == 0
    [run] = [r for r in runs(connection) if r.document_id == document.id]
    assert (run.status, run.stage) == ("queued", "embed")
    assert drive(run.id).status == "succeeded"
    document.refresh_from_db()
    assert document.source_deleted_at is None and document.chunk_count == chunks
    assert document.chunks.count() == chunks
    assert UsageEntry.objects.filter(document=document).count() == 1


def test_a_deleted_or_moved_out_file_marks_its_document(graph, org, drive_files):
    connection = imported(graph, org)

    graph.delete(drive_files["a"])
    graph.move(drive_files["c"], "Other")
    outcome = sync(connection)

    assert outcome.counts.deleted == 2 and outcome.counts.started == 0
    gone = Document.objects.filter(organisation=org, source_deleted_at__isnull=False)
    assert sorted(gone.values_list("filename", flat=True)) == ["a.pdf", "c.pdf"]
    kept = Document.objects.get(organisation=org, filename="b.docx")
    assert kept.source_deleted_at is None


def test_gone_restarts_the_listing_and_reconciles_without_duplicates(graph, org, drive_files):
    connection = imported(graph, org)
    graph.delete(drive_files["b"])
    graph.put("Contracts/late.pdf", make_pdf(1, label="late"))
    graph.forget_delta_tokens()

    outcome = sync(connection)

    assert outcome.sync.result == "ok", outcome.sync.error
    fresh = [p for _, p in graph.state.requests if p.endswith("/root/delta")]
    assert len(fresh) == 2  # the first listing, and the one Graph's 410 sent us to
    assert outcome.counts.started == 1
    assert imported_paths(connection) == [
        "/Contracts/2024/b.docx",
        "/Contracts/2024/deep/c.pdf",
        "/Contracts/a.pdf",
        "/Contracts/late.pdf",
    ]
    # b was deleted while Graph had forgotten us: only the full listing can tell.
    b = ConnectorImport.objects.get(connection=connection, name="b.docx")
    assert b.state == "deleted"
    assert Document.objects.get(id=b.document_id).source_deleted_at is not None
    connection.refresh_from_db()
    assert connection.reconcile_since is None


@pytest.mark.slow
def test_a_short_retry_after_is_waited_for_and_a_long_one_ends_the_sync_busy(
    graph, org, drive_files, monkeypatch
):
    monkeypatch.setattr("connectors.onedrive_graph.INLINE_WAIT_SECONDS", 2)
    connection = connected(graph, org)
    graph.fail_next(1, status=429, retry_after=1)
    graph.fail_next(1, status=503, retry_after=1)
    started = time.monotonic()

    outcome = sync(connection)

    assert outcome.sync.result == "ok", outcome.sync.error
    assert time.monotonic() - started >= 2
    assert len(runs(connection)) == 3

    graph.put("Contracts/more.pdf", make_pdf(1, label="more"))
    graph.fail_next(1, status=429, retry_after=120)
    cursor = Connection.objects.get(id=connection.id).cursor
    started = time.monotonic()
    outcome = sync(connection)

    assert time.monotonic() - started < 2
    connection.refresh_from_db()
    assert outcome.sync.result == "busy"
    assert connection.cursor == cursor and connection.status == "active"
    assert 110 < (connection.next_sync_at - outcome.sync.finished_at).total_seconds() <= 121
    assert len(runs(connection)) == 3


def test_an_expired_access_token_is_refreshed_and_saved_encrypted(graph, org, drive_files):
    connection = connected(graph, org)
    before = connection_credentials(connection=connection)
    graph.expire_access_tokens()  # Graph says expired although we thought it fresh

    outcome = sync(connection)

    assert outcome.sync.result == "ok", outcome.sync.error
    assert graph.state.token_grants == ["refresh_token"]
    connection.refresh_from_db()
    after = connection_credentials(connection=connection)
    assert after["access_token"] != before["access_token"]
    # Microsoft rotated the refresh token; the new one is kept.
    assert after["refresh_token"] != before["refresh_token"]
    assert after["refresh_token"] in graph.state.refresh_tokens
    assert after["access_token"] not in connection.credentials_encrypted
    assert credentials_decrypt(connection.credentials_encrypted) == after


def test_a_token_about_to_expire_is_refreshed_before_it_is_used(graph, org, drive_files):
    connection = connected(graph, org, expires_in=60)  # inside the 300 s margin

    outcome = sync(connection)

    assert outcome.sync.result == "ok", outcome.sync.error
    assert graph.state.token_grants == ["refresh_token"]
    # No call was made with the old token and refused.
    statuses = [p for m, p in graph.state.requests if m == "POST" and "token" in p]
    assert len(statuses) == 1


def test_revoked_consent_turns_the_connection_to_needs_reconnect(graph, org, drive_files):
    connection = connected(graph, org)
    graph.revoke_consent()

    outcome = sync(connection)

    connection.refresh_from_db()
    assert outcome.sync.result == "needs_reconnect"
    assert connection.status == "needs_reconnect"
    assert "connect the folder again" in connection.status_reason
    assert runs(connection) == []
    # No endless retries: the connection is not synced again until a person reconnects.
    asked = len(graph.state.token_grants)
    assert connection_sync(connection=connection) is None
    assert len(graph.state.token_grants) == asked == 1


def test_open_fetches_a_fresh_download_url_and_never_stores_it(graph, org, drive_files):
    connection = connected(graph, org)
    sync(connection)
    for run in runs(connection):
        assert drive(run.id).status == "succeeded"

    downloads = [p for m, p in graph.state.requests if p.startswith("/download/")]
    assert len(downloads) == 3
    connection.refresh_from_db()
    stored = [connection.cursor, str(connection.provider_state), connection.credentials_encrypted]
    stored += [str(v) for r in ConnectorImport.objects.all() for v in r.__dict__.values()]
    assert not any("/download/" in value or "sig=" in value for value in stored)


def test_an_expired_download_url_is_fetched_again_and_a_large_file_refused(
    graph, org, drive_files, settings
):
    connection = connected(graph, org)
    provider = OneDriveProvider()
    graph.state.download_seconds = -1  # every URL is already expired when used

    with pytest.raises(Exception, match="download link kept expiring"):
        provider.open(connection, drive_files["a"])
    item_gets = [p for _, p in graph.state.requests if f"/items/{drive_files['a']}?" in p]
    assert len(item_gets) == 2

    graph.state.download_seconds = 60
    settings.PAPERLANE_MAX_UPLOAD_BYTES = 100
    with pytest.raises(PermanentError, match="larger than 100 bytes"):
        provider.open(connection, drive_files["a"])


# A sync process that dies (SIGKILL) right after the last page's imports committed and
# before its delta link is saved: the worst moment for "exactly once". Its hold on the
# connection lasts a second, so the test need not wait out a real sync lease.
KILLED_BEFORE_THE_CURSOR = """
import os, signal, django
django.setup()
from connectors.models import Connection
from connectors import sync

def die(**kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

sync.SYNC_LEASE_SECONDS = 1
sync.connection_save_cursor = die
sync.connection_sync(connection=Connection.objects.get(id=int(os.environ["CONNECTION_ID"])))
"""


def _graph_env(graph) -> dict[str, str]:
    from django.conf import settings

    # The same SECRET_KEY: the credentials' encryption key is derived from it.
    env = graph_env(graph)
    return {**env, "SECRET_KEY": settings.SECRET_KEY}


@pytest.mark.slow
def test_a_sync_killed_between_recording_and_saving_the_cursor_loses_and_duplicates_nothing(
    graph, org, drive_files
):
    connection = connected(graph, org)
    env = process_env(CONNECTION_ID=str(connection.id), **_graph_env(graph))

    child = subprocess.run(
        [sys.executable, "-c", KILLED_BEFORE_THE_CURSOR], cwd=ROOT, env=env, timeout=60
    )

    assert child.returncode == -signal.SIGKILL
    connection.refresh_from_db()
    assert connection.cursor == "" and connection.sync_owner != ""
    assert len(runs(connection)) == 3
    # Once the dead sync's lease runs out, the next one lists everything again.
    outcome = wait_for(lambda: connection_sync(connection=connection), timeout=15, what="a sync")
    assert outcome.sync.result == "ok", outcome.sync.error
    assert outcome.counts.started == 0
    connection.refresh_from_db()
    assert "token=" in connection.cursor
    assert imported_paths(connection) == [
        "/Contracts/2024/b.docx",
        "/Contracts/2024/deep/c.pdf",
        "/Contracts/a.pdf",
    ]
    for run in runs(connection):
        assert drive(run.id).status == "succeeded"
    assert Document.objects.filter(organisation=org).count() == 3


@pytest.mark.slow
def test_a_connected_folder_is_imported_by_the_real_workers(graph, org, drive_files):
    connection = connected(graph, org)
    outcome = sync(connection)

    with running_workers(**_graph_env(graph)):
        ended = wait_terminal(outcome.counts.run_ids, timeout=120)

    assert {r.status for r in ended.values()} == {"succeeded"}, [
        r.error_message for r in ended.values()
    ]
    documents = Document.objects.filter(organisation=org)
    assert sorted(d.filename for d in documents) == ["a.pdf", "b.docx", "c.pdf"]
    assert all(d.chunk_count > 0 for d in documents)
    charged = UsageEntry.objects.filter(organisation=org)
    assert sum(u.pages for u in charged) == sum(d.page_count for d in documents)
