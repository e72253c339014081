"""Folders moved, renamed and deleted in OneDrive, against a local Graph that reports a
moved folder alone in delta, as Graph does: what is under it is imported, marked
deleted at the source, or follows to its new path, once, and never charged twice."""

import pytest
from django.conf import settings as django_settings

from connectors import sync as sync_module
from connectors.models import Connection, ConnectionFolder, ConnectorImport
from connectors.sync import connection_sync
from documents.models import Document, UsageEntry
from pipeline.models import ImportRun
from tests.connectors.signers import connected
from tests.support.files import make_docx, make_pdf
from tests.support.graph_server import graph_env, graph_fixture
from tests.support.pipeline import running_workers, wait_terminal
from tests.support.runs import drive

pytestmark = pytest.mark.django_db(transaction=True)


graph = graph_fixture()


@pytest.fixture
def tree(graph):
    """The connected folder /Contracts, and a folder of documents elsewhere in the drive."""
    ids = {
        "a": graph.put("Contracts/a.pdf", make_pdf(2, label="alpha")),
        "b": graph.put("Contracts/2024/b.docx", make_docx(3)),
        "c": graph.put("Contracts/2024/deep/c.pdf", make_pdf(1, label="gamma")),
        "d": graph.put("Inbox/Batch/d.pdf", make_pdf(2, label="delta")),
        "e": graph.put("Inbox/Batch/e.docx", make_docx(1)),
        "f": graph.put("Inbox/Batch/sub/f.pdf", make_pdf(1, label="phi")),
        "notes": graph.put("Inbox/Batch/notes.txt", b"not a document"),
        "outside": graph.put("Other/outside.pdf", make_pdf(1, label="outside")),
    }
    ids["2024"] = graph.folder("Contracts/2024")
    ids["deep"] = graph.folder("Contracts/2024/deep")
    ids["batch"] = graph.folder("Inbox/Batch")
    # Two items a page, in delta and in `children`: every listing spans pages.
    graph.state.page_size = 2
    return ids


def runs(connection) -> list[ImportRun]:
    return list(
        ImportRun.objects.filter(connector_import__connection=connection).order_by("created_at")
    )


def paths(connection) -> dict[str, str]:
    """{name: path} of every file's latest import."""
    latest: dict[str, ConnectorImport] = {}
    for record in ConnectorImport.objects.filter(connection=connection).order_by("id"):
        latest[record.file_id] = record
    return {r.name: r.path for r in latest.values()}


def sync(connection):
    outcome = connection_sync(connection=connection)
    assert outcome is not None
    assert outcome.sync.result == "ok", outcome.sync.error
    return outcome


def imported(graph, org):
    """The organisation's connection to /Contracts, synced once, every file processed."""
    connection = connected(graph, org)
    sync(connection)
    for run in runs(connection):
        assert drive(run.id).status == "succeeded"
    return connection


def calls(graph, since: int, part: str) -> list[str]:
    return [p for _, p in graph.state.requests[since:] if part in p]


def charged(org) -> list[tuple[str, int]]:
    entries = UsageEntry.objects.filter(organisation=org).select_related("document")
    return sorted((u.document.filename, u.document_version) for u in entries)


def test_a_fresh_connection_is_listed_by_delta_alone_and_remembers_its_folders(graph, org, tree):
    connection = connected(graph, org)

    outcome = sync(connection)

    assert calls(graph, 0, "/children") == []
    assert outcome.counts.started == 3
    assert paths(connection) == {
        "a.pdf": "/Contracts/a.pdf",
        "b.docx": "/Contracts/2024/b.docx",
        "c.pdf": "/Contracts/2024/deep/c.pdf",
    }
    # The folders in the connected folder (and itself), none from elsewhere in the drive.
    folders = dict(
        ConnectionFolder.objects.filter(connection=connection).values_list("item_id", "name")
    )
    assert folders == {
        connection.folder_id: "Contracts",
        tree["2024"]: "2024",
        tree["deep"]: "deep",
    }


def test_a_folder_moved_in_has_its_files_imported_once(graph, org, tree):
    connection = imported(graph, org)
    before = len(graph.state.requests)

    graph.move(tree["batch"], "Contracts")
    outcome = sync(connection)

    assert outcome.counts.started == 3 and outcome.counts.skipped == 1
    assert {n: p for n, p in paths(connection).items() if "Batch" in p} == {
        "d.pdf": "/Contracts/Batch/d.pdf",
        "e.docx": "/Contracts/Batch/e.docx",
        "f.pdf": "/Contracts/Batch/sub/f.pdf",
        "notes.txt": "/Contracts/Batch/notes.txt",
    }
    # Batch (two pages of children) and its subfolder, each listed once.
    assert len(calls(graph, before, f"/items/{tree['batch']}/children")) == 2
    assert len(calls(graph, before, "/children")) == 3
    for run_id in outcome.counts.run_ids:
        assert drive(run_id).status == "succeeded"
    pages = dict(Document.objects.filter(organisation=org).values_list("filename", "page_count"))
    assert (pages["d.pdf"], pages["e.docx"], pages["f.pdf"]) == (2, 1, 1)

    again = len(graph.state.requests)
    assert sync(connection).counts.started == 0
    assert calls(graph, again, "/children") == []
    assert len(runs(connection)) == 6
    assert charged(org) == sorted(
        (name, 1) for name in ("a.pdf", "b.docx", "c.pdf", "d.pdf", "e.docx", "f.pdf")
    )


@pytest.mark.parametrize("remove_chunks", [True, False])
def test_a_folder_moved_out_marks_its_documents_deleted_and_back_in_restores_them(
    graph, org, tree, settings, remove_chunks
):
    settings.PAPERLANE_CONNECTOR_DELETE_REMOVES_CHUNKS = remove_chunks
    connection = imported(graph, org)
    b = Document.objects.get(organisation=org, filename="b.docx")
    chunks = b.chunk_count
    assert chunks > 0

    graph.move(tree["2024"], "Other")
    outcome = sync(connection)

    assert outcome.counts.deleted == 2 and outcome.counts.started == 0
    gone = Document.objects.filter(organisation=org, source_deleted_at__isnull=False)
    assert sorted(gone.values_list("filename", flat=True)) == ["b.docx", "c.pdf"]
    assert Document.objects.get(filename="a.pdf").source_deleted_at is None
    b.refresh_from_db()
    assert b.chunks.count() == (0 if remove_chunks else chunks)
    folders = ConnectionFolder.objects.filter(connection=connection)
    assert set(folders.values_list("item_id", flat=True)) == {connection.folder_id}

    graph.move(tree["2024"], "Contracts")
    back = sync(connection)

    assert back.counts.started == 0
    for run in runs(connection):
        assert drive(run.id).status == "succeeded"
    b.refresh_from_db()
    assert b.source_deleted_at is None and b.chunks.count() == chunks
    assert paths(connection)["c.pdf"] == "/Contracts/2024/deep/c.pdf"
    assert charged(org) == [("a.pdf", 1), ("b.docx", 1), ("c.pdf", 1)]


def test_a_folder_renamed_within_has_its_paths_follow_without_a_new_import(graph, org, tree):
    connection = imported(graph, org)

    graph.rename(tree["2024"], "2024 signed")
    outcome = sync(connection)

    assert outcome.counts.started == 0 and outcome.counts.deleted == 0
    assert paths(connection) == {
        "a.pdf": "/Contracts/a.pdf",
        "b.docx": "/Contracts/2024 signed/b.docx",
        "c.pdf": "/Contracts/2024 signed/deep/c.pdf",
    }
    assert ConnectorImport.objects.filter(connection=connection).count() == 3
    assert charged(org) == [("a.pdf", 1), ("b.docx", 1), ("c.pdf", 1)]
    assert Document.objects.filter(organisation=org, source_deleted_at__isnull=False).count() == 0


def test_a_folder_moved_within_has_its_paths_follow_without_a_new_import(graph, org, tree):
    connection = imported(graph, org)

    graph.move(tree["deep"], "Contracts/Archive/old")
    outcome = sync(connection)

    assert outcome.counts.started == 0 and outcome.counts.deleted == 0
    assert paths(connection)["c.pdf"] == "/Contracts/Archive/old/deep/c.pdf"
    assert paths(connection)["b.docx"] == "/Contracts/2024/b.docx"
    assert len(runs(connection)) == 3
    assert charged(org) == [("a.pdf", 1), ("b.docx", 1), ("c.pdf", 1)]


def test_a_renamed_file_goes_by_its_new_name_without_a_new_import(graph, org, tree):
    connection = imported(graph, org)

    graph.rename(tree["a"], "agreement.pdf")
    outcome = sync(connection)

    assert outcome.counts.started == 0
    assert paths(connection)["agreement.pdf"] == "/Contracts/agreement.pdf"
    document = Document.objects.get(organisation=org, connector_imports__file_id=tree["a"])
    assert document.filename == "agreement.pdf" and document.version == 1


@pytest.mark.parametrize("contents_reported", [True, False])
def test_a_deleted_folder_leaves_no_live_document_under_it(graph, org, tree, contents_reported):
    connection = imported(graph, org)

    graph.delete(tree["2024"], report_contents=contents_reported)
    outcome = sync(connection)

    assert outcome.counts.deleted == 2
    gone = Document.objects.filter(organisation=org, source_deleted_at__isnull=False)
    assert sorted(gone.values_list("filename", flat=True)) == ["b.docx", "c.pdf"]
    states = dict(
        ConnectorImport.objects.filter(connection=connection).values_list("name", "state")
    )
    assert states == {"a.pdf": "imported", "b.docx": "deleted", "c.pdf": "deleted"}
    folders = ConnectionFolder.objects.filter(connection=connection)
    assert set(folders.values_list("item_id", flat=True)) == {connection.folder_id}


def test_the_connected_folder_deleted_takes_every_document_and_is_listed_once_more(
    graph, org, tree
):
    connection = imported(graph, org)

    graph.delete(connection.folder_id, report_contents=False)
    outcome = sync(connection)

    assert outcome.counts.deleted == 3
    assert Document.objects.filter(organisation=org, source_deleted_at__isnull=True).count() == 0
    # Nothing of its folders is left, so the next sync lists the drive from scratch once,
    # and records that it did; the one after goes on from its cursor.
    before = len(graph.state.requests)
    sync(connection)
    assert calls(graph, before, "/root/delta")[0].endswith("/root/delta")
    again = len(graph.state.requests)
    assert sync(connection).counts.deleted == 0
    assert all("token=" in p for p in calls(graph, again, "/root/delta"))


def test_a_folder_deleted_before_its_walk_takes_the_files_recorded_under_it(graph, org, tree):
    connection = imported(graph, org)
    graph.rename(tree["2024"], "2024 signed")
    # Deleted after delta named it renamed, before the sync lists it: its children 404.
    graph.before_next(
        f"/items/{tree['2024']}/children",
        lambda: graph.delete(tree["2024"], report_contents=False),
    )

    outcome = sync(connection)

    assert outcome.counts.deleted == 2
    states = dict(
        ConnectorImport.objects.filter(connection=connection).values_list("name", "state")
    )
    assert states == {"a.pdf": "imported", "b.docx": "deleted", "c.pdf": "deleted"}
    assert not ConnectionFolder.objects.filter(item_id=tree["2024"]).exists()
    # Delta reports the deletion next time: nothing is left to do.
    assert sync(connection).counts.deleted == 0
    assert Document.objects.filter(organisation=org, source_deleted_at__isnull=True).count() == 1


def test_a_walk_past_its_bound_enumerates_the_drive_again_and_loses_nothing(
    graph, org, tree, monkeypatch
):
    monkeypatch.setattr("connectors.onedrive_folders.WALK_MAX_ITEMS", 3)
    connection = imported(graph, org)
    before = len(graph.state.requests)

    graph.move(tree["batch"], "Contracts")
    graph.delete(tree["a"])
    outcome = sync(connection)

    delta = calls(graph, before, "/root/delta")
    # The listing from the cursor, then (the walk of Batch past 3 items) one from scratch.
    assert "token=" in delta[0] and delta[1].endswith("/root/delta")
    assert len(calls(graph, before, "/children")) == 2
    assert outcome.counts.started == 3
    assert {n for n, p in paths(connection).items() if "/Batch/" in p} == {
        "d.pdf",
        "e.docx",
        "f.pdf",
        "notes.txt",
    }
    assert ConnectorImport.objects.get(connection=connection, name="a.pdf").state == "deleted"
    connection.refresh_from_db()
    assert connection.reconcile_since is None and "token=" in connection.cursor
    assert ConnectionFolder.objects.filter(connection=connection, item_id=tree["batch"]).exists()

    # The next sync goes on from the new cursor, with nothing to walk.
    again = len(graph.state.requests)
    assert sync(connection).counts.started == 0
    assert calls(graph, again, "/children") == []
    assert all("token=" in p for p in calls(graph, again, "/root/delta"))


def test_a_connection_listed_before_folders_were_kept_is_enumerated_once_more(graph, org, tree):
    connection = imported(graph, org)
    ConnectionFolder.objects.filter(connection=connection).delete()
    graph.move(tree["2024"], "Other")
    before = len(graph.state.requests)

    outcome = sync(connection)

    assert calls(graph, before, "/root/delta")[0].endswith("/root/delta")
    assert outcome.counts.deleted == 2 and outcome.counts.started == 0
    assert ConnectionFolder.objects.filter(connection=connection).count() == 1
    again = len(graph.state.requests)
    sync(connection)
    assert all("token=" in p for p in calls(graph, again, "/root/delta"))


def test_a_walk_recorded_before_the_cursor_was_saved_is_not_repeated(graph, org, tree, monkeypatch):
    connection = imported(graph, org)
    cursor = Connection.objects.get(id=connection.id).cursor
    graph.move(tree["batch"], "Contracts")

    def crash(**kwargs):
        raise RuntimeError("killed before the cursor was saved")

    with monkeypatch.context() as patched:
        patched.setattr(sync_module, "connection_save_cursor", crash)
        failed = connection_sync(connection=connection)
    assert failed.sync.result == "failed" and failed.counts.started == 3
    connection.refresh_from_db()
    assert connection.cursor == cursor
    before = len(graph.state.requests)

    outcome = sync(connection)

    # Listed again from the old cursor: Batch is recorded where it is now, with its files.
    assert outcome.counts.started == 0
    assert calls(graph, before, "/children") == []
    assert len(runs(connection)) == 6


def test_a_walk_whose_imports_were_not_recorded_is_walked_again(graph, org, tree, monkeypatch):
    connection = imported(graph, org)
    graph.move(tree["batch"], "Contracts")

    def refuse(connection, record):
        raise RuntimeError("the database refused")

    with monkeypatch.context() as patched:
        patched.setattr(sync_module, "_start_run", refuse)
        failed = connection_sync(connection=connection)
    assert failed.sync.result == "failed"
    # Nothing of the page that failed, nor of the moved folder, was recorded.
    assert not ConnectionFolder.objects.filter(item_id=tree["batch"]).exists()
    assert len(runs(connection)) == 3
    before = len(graph.state.requests)

    outcome = sync(connection)

    assert outcome.counts.started == 3
    assert len(calls(graph, before, f"/items/{tree['batch']}/children")) == 2


def test_graph_throttling_a_walk_is_waited_for_or_ends_the_sync_busy(graph, org, tree, monkeypatch):
    monkeypatch.setattr("connectors.onedrive_graph.INLINE_WAIT_SECONDS", 2)
    connection = imported(graph, org)
    graph.move(tree["batch"], "Contracts")
    cursor = Connection.objects.get(id=connection.id).cursor

    graph.fail_next(1, status=429, retry_after=120, only="/children")
    busy = connection_sync(connection=connection)

    assert busy.sync.result == "busy" and busy.counts.started == 0
    connection.refresh_from_db()
    assert connection.cursor == cursor

    graph.fail_next(1, status=503, retry_after=1, only="/children")
    outcome = sync(connection)

    assert outcome.counts.started == 3
    assert graph.state.failures == []


def test_on_onedrive_for_business_a_walked_file_keeps_the_version_delta_gave_it(graph, org, tree):
    graph.state.drive_type = "business"
    connection = imported(graph, org)

    graph.rename(tree["2024"], "2024 signed")
    graph.move(tree["batch"], "Contracts")
    outcome = sync(connection)

    # `children` gives a cTag that delta leaves out on Business: the hash stays the version.
    assert outcome.counts.started == 3
    versions = ConnectorImport.objects.filter(connection=connection).values_list(
        "content_version", flat=True
    )
    assert all(v.startswith("quickXorHash:") for v in versions)
    assert paths(connection)["b.docx"] == "/Contracts/2024 signed/b.docx"
    graph.put("Contracts/Batch/d.pdf", make_pdf(3, label="delta edited"))
    assert sync(connection).counts.started == 1


@pytest.mark.slow
def test_a_folder_moved_in_is_imported_by_the_real_workers(graph, org, tree):
    connection = connected(graph, org)
    first = sync(connection)
    graph.move(tree["batch"], "Contracts")
    moved = sync(connection)
    assert len(moved.counts.run_ids) == 3

    # The same SECRET_KEY: the connection's credentials are encrypted under a key from it.
    env = graph_env(graph)
    with running_workers(**env, SECRET_KEY=django_settings.SECRET_KEY):
        ended = wait_terminal(first.counts.run_ids + moved.counts.run_ids, timeout=120)

    assert {r.status for r in ended.values()} == {"succeeded"}, [
        r.error_message for r in ended.values()
    ]
    documents = Document.objects.filter(organisation=org)
    assert sorted(d.filename for d in documents) == [
        "a.pdf",
        "b.docx",
        "c.pdf",
        "d.pdf",
        "e.docx",
        "f.pdf",
    ]
    assert all(d.chunk_count > 0 for d in documents)
    entries = UsageEntry.objects.filter(organisation=org)
    assert sum(u.pages for u in entries) == sum(d.page_count for d in documents)
    assert entries.count() == 6
