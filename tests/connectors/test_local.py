"""The local-folder connector in the test process: real folder, real sync, real stages."""

import os
import shutil
import threading

import pytest
from django.db import connection as db
from django.test.utils import CaptureQueriesContext

from connectors import sync as sync_module
from connectors.local import LocalFolderProvider
from connectors.models import Connection, ConnectorImport
from documents.models import Chunk, Document, UsageEntry
from documents.selectors import document_list
from documents.services.organisations import organisation_set_limit
from pipeline.models import ImportRun
from pipeline.services.deletion import document_delete
from pipeline.services.people import run_retry
from pipeline.services.transitions import Actor
from tests.support.files import make_docx, make_pdf
from tests.support.folders import fingerprint, local_folder_fixtures, sync, write
from tests.support.pages import page_text
from tests.support.runs import drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)


_fast_settle, folder, connection = local_folder_fixtures("scans")


def sync_until_listed(connection):
    """Two polls: the first sees files, the second lists those that did not change."""
    first = sync(connection)
    second = sync(connection)
    return first.counts.run_ids + second.counts.run_ids


def test_it_imports_each_supported_file_once_and_skips_the_rest(org, folder, connection):
    write(folder, "a.pdf", make_pdf(3))
    write(folder, "deep/er/b.docx", make_docx(4))
    write(folder, "notes.txt", b"plain text is not imported")
    write(folder, ".hidden.pdf", make_pdf(1))

    run_ids = sync_until_listed(connection)
    runs = [drive(run_id) for run_id in run_ids]

    assert sorted(r.status for r in runs) == ["succeeded", "succeeded"]
    assert {r.source for r in runs} == {"connector"} and {r.priority for r in runs} == {"bulk"}
    paths = {r.connector_import.path: r.document for r in runs}
    assert set(paths) == {"a.pdf", "deep/er/b.docx"}
    assert paths["a.pdf"].page_count == 3 and paths["a.pdf"].filename == "a.pdf"
    skipped = ConnectorImport.objects.get(path="notes.txt")
    assert skipped.state == "skipped" and ".txt" in skipped.reason
    assert not ConnectorImport.objects.filter(path=".hidden.pdf").exists()
    # Nothing changed: more polls record nothing and start nothing.
    assert sync_until_listed(connection) == []
    assert ImportRun.objects.count() == 2
    sync(connection)
    assert (connection.files_imported, connection.files_skipped) == (2, 1)
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (3 + paths["deep/er/b.docx"].page_count, 0)


def test_a_quiet_poll_reads_the_cursor_once_and_never_writes_it(folder, connection):
    for n in range(20):
        write(folder, f"doc{n}.pdf", make_pdf(1, label=f"D{n}"))
    assert len(sync_until_listed(connection)) == 20
    cursor = Connection.objects.get(id=connection.id).cursor
    assert len(cursor) > 20 * 50

    with CaptureQueriesContext(db) as queries:
        outcome = sync_module.connection_sync(connection=connection)

    assert outcome is not None and outcome.counts.seen == 0
    statements = [q["sql"] for q in queries.captured_queries]
    writes = [
        sql
        for sql in statements
        if sql.startswith('UPDATE "documents_connection"') and '"cursor"' in sql
    ]
    reads = [sql for sql in statements if '"documents_connection"."cursor"' in sql]
    assert writes == []
    # The claim reads it for the listing; nothing else does.
    assert len(reads) == 1
    connection.refresh_from_db()
    assert connection.cursor == cursor and connection.last_sync_result == "ok"


def test_it_leaves_every_file_byte_for_byte_and_time_for_time(folder, connection):
    write(folder, "a.pdf", make_pdf(2))
    write(folder, "sub/b.docx", make_docx(2))
    write(folder, "c.txt", b"x")
    before = fingerprint(folder)

    for run_id in sync_until_listed(connection):
        assert drive(run_id).status == "succeeded"

    assert fingerprint(folder) == before


def test_an_edited_file_is_a_new_version_of_the_same_document(org, folder, connection):
    path = write(folder, "report.pdf", make_pdf(2, label="First"))
    [first_id] = sync_until_listed(connection)
    first = drive(first_id)
    path.write_bytes(make_pdf(5, label="Second"))

    [second_id] = sync_until_listed(connection)
    second = drive(second_id)

    assert second.id != first.id and second.status == "succeeded"
    assert second.document_id == first.document_id
    document = Document.objects.get(id=first.document_id)
    assert (document.version, document.page_count) == (2, 5)
    charges = UsageEntry.objects.filter(document=document).order_by("document_version")
    assert [(c.document_version, c.pages) for c in charges] == [(1, 2), (2, 5)]
    # Search holds the new version's text only.
    assert set(Chunk.objects.filter(document=document).values_list("version", flat=True)) == {2}
    assert "Second" in Chunk.objects.filter(document=document).first().text
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (7, 0)
    versions = ConnectorImport.objects.filter(file_id="report.pdf").order_by("id")
    assert [v.document_version for v in versions] == [1, 2]


def test_a_deleted_file_marks_its_document_deleted_at_the_source(folder, connection):
    path = write(folder, "gone.pdf", make_pdf(1))
    [run_id] = sync_until_listed(connection)
    run = drive(run_id)
    assert run.document.chunk_count > 0
    path.unlink()

    outcome = sync(connection)

    assert outcome.counts.deleted == 1
    document = Document.objects.get(id=run.document_id)
    assert document.source_deleted_at is not None
    assert not Chunk.objects.filter(document=document).exists()
    assert ConnectorImport.objects.get(file_id="gone.pdf").state == "deleted"


def test_a_crash_between_recording_and_saving_the_cursor_duplicates_nothing(
    folder, connection, monkeypatch
):
    for n in range(3):
        write(folder, f"doc{n}.pdf", make_pdf(1))
    sync(connection)  # sees them; the next poll lists them
    saved = sync_module.connection_save_cursor

    def crash(**kwargs):
        raise RuntimeError("killed after the page was recorded")

    monkeypatch.setattr(sync_module, "connection_save_cursor", crash)
    crashed = sync(connection)
    assert crashed.sync.result == "failed" and len(crashed.counts.run_ids) == 3
    monkeypatch.setattr(sync_module, "connection_save_cursor", saved)

    again = sync(connection)

    assert again.sync.result == "ok" and again.counts.run_ids == []
    assert ImportRun.objects.count() == 3
    assert ConnectorImport.objects.count() == 3
    assert sync(connection).counts.run_ids == []


def test_a_page_limit_that_fits_some_files_charges_exactly_those(org, folder, connection):
    organisation_set_limit(organisation=org, page_limit=10)
    for n in range(6):
        write(folder, f"three-{n}.pdf", make_pdf(3, label=f"File {n}"))

    runs = [drive(run_id) for run_id in sync_until_listed(connection)]

    succeeded = [r for r in runs if r.status == "succeeded"]
    failed = [r for r in runs if r.status == "failed"]
    assert len(succeeded) == 3 and len(failed) == 3
    assert {r.error_code for r in failed} == {"quota_exceeded"}
    assert "Raise the page limit" in failed[0].error_message
    charged = UsageEntry.objects.filter(organisation=org)
    assert sorted(e.document_id for e in charged) == sorted(r.document_id for r in succeeded)
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (9, 0)
    # The connection's page says which files failed and why.
    sync(connection)
    assert connection.files_failed == 3
    reasons = ConnectorImport.objects.filter(state="failed").values_list("reason", flat=True)
    assert all("pages of your quota are left" in reason for reason in reasons)

    organisation_set_limit(organisation=org, page_limit=20)
    retried = run_retry(run=failed[0], actor=Actor("user:test")).run
    assert drive(retried.id).status == "succeeded"
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (12, 0)


def test_a_missing_folder_pauses_the_connection_after_repeated_failures(
    folder, connection, monkeypatch
):
    monkeypatch.setattr("connectors.sync.MAX_FAILURES", 3)
    folder.rename(folder.with_name("moved"))

    results = [sync(connection).sync.result for _ in range(3)]

    assert results == ["failed"] * 3
    assert connection.status == Connection.Status.PAUSED
    assert "3 failed syncs in a row. The folder is gone" in connection.status_reason
    assert "does not exist" in connection.last_error
    assert connection.syncs.count() == 3
    # Paused: it is not synced until resumed.
    assert sync_module.connection_sync(connection=connection, only_due=False) is None


def test_a_file_still_changing_is_not_listed_until_it_stops(folder, connection, monkeypatch):
    path = write(folder, "growing.pdf", make_pdf(3)[:200])
    assert sync(connection).counts.run_ids == []  # seen for the first time
    with path.open("ab") as fh:
        fh.write(b"more bytes")  # it changed since the last poll
    assert sync(connection).counts.run_ids == []
    monkeypatch.setattr("connectors.local.STABLE_SECONDS", 60)
    path.write_bytes(make_pdf(3))
    assert sync(connection).counts.run_ids == []
    # Unchanged, but not yet for 60 s.
    assert sync(connection).counts.run_ids == []
    monkeypatch.setattr("connectors.local.STABLE_SECONDS", 0)

    [run_id] = sync(connection).counts.run_ids

    run = drive(run_id)
    assert run.status == "succeeded" and run.document.page_count == 3
    assert ConnectorImport.objects.count() == 1


def test_links_are_not_followed_out_of_the_folder(tmp_path, folder, connection):
    outside = write(tmp_path, "outside/secret.pdf", make_pdf(1))
    (folder / "link.pdf").symlink_to(outside)
    (folder / "linked-dir").symlink_to(outside.parent, target_is_directory=True)
    write(folder, "real.pdf", make_pdf(1))

    run_ids = sync_until_listed(connection)

    assert [ImportRun.objects.get(id=r).connector_import.path for r in run_ids] == ["real.pdf"]
    provider = LocalFolderProvider()
    for escape in ("link.pdf", "linked-dir/secret.pdf", "../outside/secret.pdf"):
        with pytest.raises(OSError):
            provider.open(connection, escape)


def test_a_file_name_that_is_not_utf8_fails_and_the_rest_imports(folder, connection):
    # A Latin-1 name, as old shares and archives keep them.
    latin1 = os.path.join(os.fsencode(folder), b"caf\xe9.pdf")
    with open(latin1, "wb") as fh:
        fh.write(make_pdf(1))
    write(folder, "good.pdf", make_pdf(2))

    [run_id] = sync_until_listed(connection)

    assert drive(run_id).document.filename == "good.pdf"
    refused = ConnectorImport.objects.get(state="failed")
    assert (refused.file_id, refused.path) == ("caf\\xe9.pdf", "caf\\xe9.pdf")
    assert "not valid UTF-8" in refused.reason and "rename" in refused.reason
    assert connection.status == "active" and connection.files_failed == 1
    assert sync_until_listed(connection) == []  # reported once
    os.rename(latin1, os.path.join(os.fsencode(folder), b"cafe.pdf"))

    [renamed] = sync_until_listed(connection)

    assert drive(renamed).status == "succeeded"
    assert ConnectorImport.objects.get(file_id="caf\\xe9.pdf").state == "deleted"


def test_a_name_an_upload_would_refuse_fails_with_why_and_imports_once_renamed(
    folder, connection, member_client
):
    long_name = "x" * 226 + ".pdf"  # 230 characters: the file system takes it
    write(folder, "bell\x07and\x1b[31mred.pdf", make_pdf(1))
    write(folder, long_name, make_pdf(1))
    write(folder, "good.pdf", make_pdf(2))

    [run_id] = sync_until_listed(connection)

    assert drive(run_id).document.filename == "good.pdf"
    refused = {r.path: r for r in ConnectorImport.objects.filter(state="failed")}
    assert set(refused) == {"bell\\x07and\\x1b[31mred.pdf", long_name}
    assert all(r.run_id is None and r.document_id is None for r in refused.values())
    control = refused["bell\\x07and\\x1b[31mred.pdf"]
    assert control.name == "bell\\x07and\\x1b[31mred.pdf"
    assert "control characters" in control.reason and "rename the file" in control.reason
    assert "longer than 200 characters" in refused[long_name].reason
    assert Document.objects.count() == 1
    assert (connection.files_failed, connection.status) == (2, "active")
    page = page_text(member_client.get(f"/connections/{connection.id}/"))
    assert "contains control characters" in page and "longer than 200 characters" in page
    assert sync_until_listed(connection) == []  # reported once

    os.rename(folder / "bell\x07and\x1b[31mred.pdf", folder / "bell and red.pdf")
    [renamed] = sync_until_listed(connection)

    assert drive(renamed).document.filename == "bell and red.pdf"
    assert Document.objects.count() == 2


def test_a_folder_swapped_for_a_link_after_any_check_is_not_followed(
    tmp_path, folder, connection, monkeypatch
):
    write(folder, "deep/report.pdf", make_pdf(1))
    outside = write(tmp_path, "outside/report.pdf", make_pdf(1))
    provider = LocalFolderProvider()
    provider.open(connection, "deep/report.pdf").close()
    (folder / "deep" / "report.pdf").unlink()
    (folder / "deep").rmdir()
    (folder / "deep").symlink_to(outside.parent, target_is_directory=True)
    # Whatever was checked before the file is opened saw no link: the swap came after.
    monkeypatch.setattr(os.path, "realpath", os.path.abspath)

    with pytest.raises(OSError):
        provider.open(connection, "deep/report.pdf")


def test_a_fifo_swapped_in_for_a_file_is_refused_without_waiting_for_a_writer(folder, connection):
    os.mkfifo(folder / "report.pdf")
    outcome = []

    def read():
        try:
            LocalFolderProvider().open(connection, "report.pdf").close()
            outcome.append("opened")
        except OSError as error:
            outcome.append(error)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(5)
    if reader.is_alive():  # blocked in open(): let it go before failing
        with open(folder / "report.pdf", "wb"):
            pass
    assert len(outcome) == 1 and isinstance(outcome[0], FileNotFoundError)


def test_a_file_moved_within_the_folder_stays_one_document_charged_once(org, folder, connection):
    path = write(folder, "inbox/report.pdf", make_pdf(3))
    [run_id] = sync_until_listed(connection)
    first = drive(run_id)
    (folder / "filed").mkdir()
    path.rename(folder / "filed" / "2024-report.pdf")  # keeps its bytes and times

    started = sync_until_listed(connection)

    assert started == []
    run = drive(first.id)  # back to embed: its deletion took its chunks out of search
    assert run.status == "succeeded" and ImportRun.objects.count() == 1
    sync(connection)
    record = ConnectorImport.objects.get()
    assert (record.file_id, record.path, record.state) == (
        "filed/2024-report.pdf",
        "filed/2024-report.pdf",
        "imported",
    )
    document = Document.objects.get(id=first.document_id)
    assert document.filename == "2024-report.pdf" and document.source_deleted_at is None
    assert document.chunk_count > 0
    assert list(UsageEntry.objects.values_list("pages", flat=True)) == [3]
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (3, 0)


def test_a_copy_of_a_file_is_recorded_as_a_duplicate_of_its_document_and_not_charged(
    org, folder, connection
):
    path = write(folder, "report.pdf", make_pdf(2))
    [first] = sync_until_listed(connection)
    original = drive(first)
    shutil.copyfile(path, folder / "copy.pdf")  # the same bytes, written now

    [second] = sync_until_listed(connection)
    copy = drive(second)

    assert (copy.status, copy.error_code) == ("failed", "duplicate")
    assert "copy.pdf has the same content as report.pdf" in copy.error_message
    assert list(UsageEntry.objects.values_list("document_id", flat=True)) == [original.document_id]
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (2, 0)
    sync(connection)
    record = ConnectorImport.objects.get(path="copy.pdf")
    assert (record.state, record.duplicate_of_id) == ("duplicate", original.document_id)
    assert record.get_state_display() == "Duplicate" and record.reason == copy.error_message
    connection.refresh_from_db()
    assert (connection.files_imported, connection.files_skipped) == (1, 1)
    # The list shows the document that has the bytes, not an empty failed one beside it.
    assert [d.id for d in document_list(organisation=org)] == [original.document_id]
    # Changed, the copy is a document of its own (not one "deleted here").
    write(folder, "copy.pdf", make_pdf(4))
    [third] = sync_until_listed(connection)
    changed = drive(third)
    assert changed.status == "succeeded", changed.error_message
    listed = {d.filename for d in document_list(organisation=org)}
    assert listed == {"report.pdf", "copy.pdf"}


def test_a_file_with_the_bytes_of_an_uploaded_document_is_not_charged_again(
    org, api, folder, connection
):
    uploaded = accepted_run(api, make_pdf(3), name="scan.pdf")
    write(folder, "inbox/scan-0001.pdf", make_pdf(3))

    [run_id] = sync_until_listed(connection)
    run = drive(run_id)

    assert (run.status, run.error_code) == ("failed", "duplicate")
    sync(connection)
    record = ConnectorImport.objects.get()
    assert (record.state, record.duplicate_of_id) == ("duplicate", uploaded.document_id)
    org.refresh_from_db()
    assert org.pages_reserved == 3  # the upload's, not yet settled; nothing for the file
    assert not UsageEntry.objects.exists()


def test_a_deleted_documents_file_moved_or_edited_in_the_folder_stays_out(org, folder, connection):
    path = write(folder, "inbox/report.pdf", make_pdf(3))
    [run_id] = sync_until_listed(connection)
    document = drive(run_id).document
    document_delete(document=document, actor=Actor("user:alice"))
    (folder / "filed").mkdir()
    moved = path.rename(folder / "filed" / "report.pdf")  # keeps its bytes and times

    assert sync_until_listed(connection) == []
    moved.write_bytes(make_pdf(4, label="Edited"))
    assert sync_until_listed(connection) == []

    assert ImportRun.objects.get().status == "succeeded"  # not sent back to embed
    assert not Chunk.objects.exists()
    edited = ConnectorImport.objects.filter(file_id="filed/report.pdf").latest("id")
    assert edited.state == "skipped" and "deleted in Paperlane" in edited.reason
    document.refresh_from_db()
    assert document.deleted_at is not None and document.version == 1
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (3, 0)
