"""The sync against a provider whose listings the test writes: repeated pages and items,
restarted listings, deletions, a busy provider, revoked consent, and two syncs at once."""

import hashlib
import io
import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from connectors import sync as sync_module
from connectors.base import ChangePage, NeedsReconnect, ProviderBusy, RemoteFile, RemoteFolder
from connectors.folders import _outermost
from connectors.loop import connections_due, connectors_maintain, connectors_sync_due
from connectors.models import Connection, ConnectionEvent, ConnectionFolder, ConnectorImport
from connectors.registry import PROVIDERS
from connectors.services import SYSTEM, connection_request_sync
from connectors.sync import (
    connection_claim_sync,
    connection_record_page,
    connection_refresh_imports,
    connection_sync,
)
from documents.models import Chunk, Document
from documents.services.orphans import stored_orphans_remove
from documents.services.removal import document_mark_deleted
from documents.storage import document_write_key, storage_open, storage_put
from pipeline.engine import execute_stage
from pipeline.models import ImportRun
from pipeline.services.deletion import document_delete
from pipeline.services.transitions import Actor
from tests.connectors.signers import signer
from tests.support.files import make_pdf
from tests.support.folders import sync
from tests.support.providers import ScriptedProvider, page
from tests.support.runs import drive
from tests.support.storage import storage_exists

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def remote(monkeypatch):
    monkeypatch.setitem(PROVIDERS, "onedrive", "tests.support.providers.ScriptedProvider")
    ScriptedProvider.script, ScriptedProvider.files, ScriptedProvider.cursors_given = [], {}, []
    yield ScriptedProvider
    ScriptedProvider.script, ScriptedProvider.files = [], {}
    ScriptedProvider.maintain_error = None


@pytest.fixture
def connection(org):
    # Read with the sign-in of an admin of the organisation, as a OneDrive one is.
    return Connection.objects.create(
        organisation=org,
        provider="onedrive",
        folder_id="FOLDER",
        folder_path="/Contracts",
        created_by=signer(org),
    )


def a_person(connection) -> Actor:
    """An admin of the connection's organisation, asking on its page."""
    return Actor.of(user=signer(connection.organisation))


def f(file_id, version="v1", name=None, **kwargs):
    return RemoteFile(
        file_id=file_id,
        version=version,
        name=name or f"{file_id}.pdf",
        path=f"{file_id}.pdf",
        **kwargs,
    )


def test_replaying_every_page_twice_starts_no_extra_run(remote, connection):
    pages = [page(f("a"), f("b")), page(f("c"), f("a"), cursor="delta-1")]
    remote.script = [pages, pages]

    first, second = sync(connection), sync(connection)

    assert len(first.counts.run_ids) == 3 and second.counts.run_ids == []
    assert ImportRun.objects.count() == ConnectorImport.objects.count() == 3
    assert remote.cursors_given == [None, "delta-1"]
    for records in range(2):
        counts = connection_record_page(connection=connection, page=pages[records])
        assert counts.started == 0


def test_the_cursor_is_saved_only_with_a_page_that_carries_one(remote, connection):
    remote.script = [[page(f("a")), page(f("b"), cursor="delta-1"), RuntimeError("network")]]

    outcome = sync(connection)

    assert outcome.sync.result == "failed"
    assert connection.cursor == "delta-1" and connection.consecutive_failures == 1
    assert connection.status == "error" and connection.last_error == "RuntimeError: network"
    # Members read the kind of problem in plain words, not the exception.
    assert "operators have the details" in connection.status_reason
    assert outcome.sync.problem == "unknown" and "network" not in outcome.sync.problem_text


def test_a_restarted_listing_records_files_not_listed_again_as_deleted(remote, connection):
    remote.files = {"a": make_pdf(1, label="A"), "b": make_pdf(1, label="B")}
    remote.script = [
        [page(f("a"), f("b"), cursor="delta-1")],
        # 410 Gone: everything again from nothing; b is not there any more, a is as it was.
        [page(f("a"), restarted=True), page(cursor="delta-2")],
    ]
    first = sync(connection)
    for run_id in first.counts.run_ids:
        assert drive(run_id).status == "succeeded"

    second = sync(connection)

    assert second.counts.run_ids == [] and second.counts.deleted == 1
    assert ConnectorImport.objects.get(file_id="b").state == "deleted"
    assert ConnectorImport.objects.get(file_id="a").state == "imported"
    b = Document.objects.filter(connector_imports__file_id="b").distinct().get()
    assert b.source_deleted_at is not None
    assert (
        Document.objects.filter(connector_imports__file_id="a").distinct().get().source_deleted_at
        is None
    )
    connection.refresh_from_db()
    assert connection.reconcile_since is None and connection.cursor == "delta-2"


def at(file_id, path, **kwargs):
    return RemoteFile(
        file_id=file_id, version="v1", name=path.rpartition("/")[2], path=path, **kwargs
    )


def folders(connection) -> dict[str, tuple[str, str]]:
    rows = ConnectionFolder.objects.filter(connection=connection)
    return {r.item_id: (r.parent_id, r.name) for r in rows}


def test_a_pages_folders_are_saved_with_its_imports_or_not_at_all(remote, connection, monkeypatch):
    listing = [
        ChangePage(
            files=[at("a", "/Contracts/Docs/a.pdf")],
            folders=[RemoteFolder("D", "FOLDER", "Docs")],
            cursor="delta-1",
        )
    ]
    remote.script = [listing, listing]

    def refuse(connection, record):
        raise RuntimeError("the database refused")

    with monkeypatch.context() as patched:
        patched.setattr(sync_module, "_start_run", refuse)
        assert sync(connection).sync.result == "failed"
    assert folders(connection) == {} and ConnectorImport.objects.count() == 0

    assert sync(connection).counts.started == 1
    assert folders(connection) == {"D": ("FOLDER", "Docs")}


def test_a_folder_deleted_with_its_contents_takes_the_files_not_listed_since(remote, connection):
    remote.script = [
        [
            ChangePage(
                files=[
                    at("a", "/Contracts/Docs/a.pdf"),
                    at("b", "/Contracts/Docs/sub/b.pdf"),
                    at("c", "/Contracts/Docs/sub/c.pdf"),
                    at("d", "/Contracts/Docsier/d.pdf"),
                    at("e", "/Contracts/Docs/e.pdf"),
                ],
                folders=[RemoteFolder("D", "FOLDER", "Docs"), RemoteFolder("S", "D", "sub")],
                cursor="delta-1",
            )
        ],
        [
            # b was moved out of Docs before Docs was deleted; e went to a new folder of
            # the same name; c was deleted with Docs, but the listing names only the
            # folder (as Graph may).
            ChangePage(files=[at("b", "/Contracts/Kept/b.pdf"), at("e", "/Contracts/Docs/e.pdf")]),
            ChangePage(
                folders=[
                    RemoteFolder("D", gone=True, deleted_path="/Contracts/Docs/"),
                    RemoteFolder("S", gone=True),
                ],
                cursor="delta-2",
            ),
        ],
    ]
    sync(connection)

    outcome = sync(connection)

    assert outcome.counts.deleted == 2 and outcome.counts.started == 0
    states = dict(ConnectorImport.objects.values_list("file_id", "state"))
    assert states == {"a": "deleted", "b": "queued", "c": "deleted", "d": "queued", "e": "queued"}
    assert ConnectorImport.objects.get(file_id="b").path == "/Contracts/Kept/b.pdf"
    assert folders(connection) == {}


def test_a_restarted_listing_forgets_the_folders_it_did_not_list(remote, connection):
    remote.script = [
        [
            ChangePage(
                folders=[RemoteFolder("D", "FOLDER", "Docs"), RemoteFolder("E", "FOLDER", "Old")],
                cursor="delta-1",
            )
        ],
        [ChangePage(folders=[RemoteFolder("D", "FOLDER", "Docs")], restarted=True, cursor="d2")],
    ]
    sync(connection)

    sync(connection)

    assert folders(connection) == {"D": ("FOLDER", "Docs")}


def test_a_deleted_item_and_the_same_item_twice_in_one_page(remote, connection):
    remote.script = [
        [page(f("a"), f("a", "v2"), f("b"), f("b", deleted=True), f("never", deleted=True))]
    ]

    outcome = sync(connection)

    assert outcome.counts.started == 1
    assert list(ConnectorImport.objects.values_list("file_id", "content_version")) == [("a", "v2")]


def test_unsupported_types_are_recorded_as_skipped_without_a_run(remote, connection):
    remote.script = [
        [page(f("x", name="photo.HEIC"), f("y", name="Report.DOCX"), f("z", name="scan.TIF"))]
    ]

    outcome = sync(connection)

    assert outcome.counts.started == 2 and outcome.counts.skipped == 1
    skipped = ConnectorImport.objects.get(file_id="x")
    assert skipped.state == "skipped" and skipped.run is None
    assert skipped.reason == (
        "Only PDF, Word (.docx), PNG, JPEG and TIFF files are imported; this file is .heic."
    )


def test_a_busy_provider_waits_and_is_not_a_failure(remote, connection):
    remote.script = [ProviderBusy("Too many requests", retry_after=120)]

    outcome = sync(connection)

    assert outcome.sync.result == "busy"
    assert connection.consecutive_failures == 0 and connection.status == "active"
    wait = (connection.next_sync_at - outcome.sync.finished_at).total_seconds()
    assert 119 <= wait <= 121
    # Not due before then.
    assert connection_sync(connection=connection, only_due=True) is None


def test_a_change_notification_waits_for_the_retry_after_the_provider_asked_for(remote, connection):
    remote.script = [ProviderBusy("Too many requests", retry_after=600), [page(cursor="d1")]]
    sync(connection)

    assert connection_request_sync(connection_id=connection.id, actor=SYSTEM)

    assert connections_due() == []
    assert connection_sync(connection=connection, only_due=True) is None
    # Once the wait is over, the sync runs and answers the request.
    Connection.objects.filter(id=connection.id).update(next_sync_at=timezone.now())
    assert connections_due() == [connection.id]
    assert connection_sync(connection=connection, only_due=True) is not None
    connection.refresh_from_db()
    assert connection.sync_requested_at is None and connection.cursor == "d1"


def test_a_change_notification_waits_for_the_error_backoff(remote, connection):
    remote.script = [RuntimeError("network"), [page(cursor="d1")]]
    sync(connection)
    assert connection.next_sync_at > timezone.now()

    assert connection_request_sync(connection_id=connection.id, actor=SYSTEM)

    assert connections_due() == []
    assert connection_sync(connection=connection, only_due=True) is None
    assert remote.script == [[page(cursor="d1")]]


def test_a_person_asking_for_a_sync_ends_the_error_backoff(remote, connection):
    remote.script = [RuntimeError("network"), [page(cursor="d1")]]
    sync(connection)

    assert connection_request_sync(connection_id=connection.id, actor=a_person(connection))

    assert connections_due() == [connection.id]
    assert connection_sync(connection=connection, only_due=True).sync.result == "ok"


def test_a_person_asking_for_a_sync_still_waits_for_the_providers_retry_after(remote, connection):
    remote.script = [ProviderBusy("slow down", retry_after=600), [page(cursor="d1")]]
    sync(connection)

    assert connection_request_sync(connection_id=connection.id, actor=a_person(connection))

    assert connections_due() == []


def test_revoked_consent_needs_a_reconnect_and_stops_syncing(remote, connection):
    remote.script = [NeedsReconnect("The user revoked consent.")]

    outcome = sync(connection)

    assert outcome.sync.result == "needs_reconnect"
    assert connection.status == "needs_reconnect"
    assert "revoked" in connection.last_error
    assert "connect the folder again" in connection.status_reason
    assert connection_sync(connection=connection) is None


def test_a_sync_now_request_is_answered_by_the_next_sync(remote, connection):
    remote.script = [[page(cursor="d1")], [page(cursor="d2")]]
    sync(connection)
    assert connection_sync(connection=connection, only_due=True) is None
    Connection.objects.filter(id=connection.id).update(sync_requested_at=connection.updated_at)

    assert connection_sync(connection=connection, only_due=True) is not None
    connection.refresh_from_db()
    assert connection.sync_requested_at is None and connection.cursor == "d2"


def test_a_connection_held_by_one_sync_is_not_synced_by_another(remote, connection):
    assert connection_claim_sync(connection_id=connection.id, owner="host-a") is not None
    assert connection_sync(connection=connection, owner="host-b") is None
    assert connection_claim_sync(connection_id=connection.id, owner="host-b") is None


def test_two_syncs_started_together_never_both_run(remote, connection):
    started, release = threading.Event(), threading.Event()

    def slow_listing():
        started.set()
        release.wait(10)
        yield page(f("a"), cursor="d1")

    # A listing that waits: whichever sync takes the connection holds it meanwhile.
    remote.script = [slow_listing(), slow_listing()]
    results, barrier = [], threading.Barrier(2)

    def run(owner):
        from django.db import connection as db

        barrier.wait()
        try:
            results.append(connection_sync(connection=connection, owner=owner))
        finally:
            db.close()

    threads = [threading.Thread(target=run, args=(name,)) for name in ("host-a", "host-b")]
    for thread in threads:
        thread.start()
    started.wait(10)
    release.set()
    for thread in threads:
        thread.join(20)

    ran = [r for r in results if r is not None]
    assert len(results) == 2 and len(ran) == 1
    assert ImportRun.objects.count() == 1


def test_a_version_replaced_before_it_was_stored_is_skipped_not_charged(remote, connection):
    remote.files = {"a": make_pdf(2)}
    remote.script = [[page(f("a", "v1"))], [page(f("a", "v2"))]]
    [old] = sync(connection).counts.run_ids
    [new] = sync(connection).counts.run_ids

    assert drive(old).error_code == "superseded"
    assert drive(new).status == "succeeded"

    connection_refresh_imports(connection=connection)
    states = dict(ConnectorImport.objects.values_list("content_version", "state"))
    assert states == {"v1": "skipped", "v2": "imported"}
    document = Document.objects.filter(connector_imports__file_id="a").distinct().get()
    assert document.version == 1 and document.usage.count() == 1


def test_a_new_version_stored_cancels_the_older_one_still_in_the_pipeline(remote, connection):
    remote.files = {"a": make_pdf(2, label="Old")}
    remote.script = [[page(f("a", "v1"))], [page(f("a", "v2"))]]
    [old] = sync(connection).counts.run_ids
    execute_stage(str(old), "create")
    execute_stage(str(old), "store")  # v1 stored; extract is due
    remote.files = {"a": make_pdf(3, label="New")}
    [new] = sync(connection).counts.run_ids

    assert drive(new).status == "succeeded"

    assert ImportRun.objects.get(id=old).status == "cancelled"
    assert drive(old).status == "cancelled"
    document = Document.objects.filter(connector_imports__file_id="a").distinct().get()
    assert (document.version, document.page_count) == (2, 3)
    assert [u.document_version for u in document.usage.all()] == [2]
    connection_refresh_imports(connection=connection)
    states = dict(ConnectorImport.objects.values_list("content_version", "state"))
    assert states == {"v1": "skipped", "v2": "imported"}


def test_an_older_version_stored_late_leaves_the_newer_versions_bytes_alone(
    remote, connection, media_files
):
    old_data, new_data = make_pdf(2, label="Old"), make_pdf(3, label="New")
    remote.script = [[page(f("a", "v1"))], [page(f("a", "v2"))]]
    [old] = sync(connection).counts.run_ids
    execute_stage(str(old), "create")
    newer = {}

    def store_the_edit():
        from django.db import connection as db

        try:
            [newer["run"]] = sync(connection).counts.run_ids
            execute_stage(str(newer["run"]), "create")
            execute_stage(str(newer["run"]), "store")
        finally:
            db.close()

    def edited_while_downloading():
        # The file is edited while its old version downloads; the new version's run
        # stores its bytes and commits before the old one's store ends.
        remote.files["a"] = new_data
        thread = threading.Thread(target=store_the_edit)
        thread.start()
        thread.join(30)
        return old_data

    remote.files = {"a": edited_while_downloading}
    execute_stage(str(old), "store")

    assert drive(newer["run"]).status == "succeeded"
    document = Document.objects.get(runs=newer["run"])
    assert document.sha256 == hashlib.sha256(new_data).hexdigest()
    assert document.page_count == 3
    with storage_open(key=document.storage_key) as fh:
        assert fh.read() == new_data
    assert drive(old).status == "cancelled"
    # The loser's bytes went with its rolled-back store: only the newest are kept.
    assert media_files() == [document.storage_key]


def test_the_orphan_sweep_removes_stored_versions_no_document_points_to(
    remote, connection, media_files
):
    remote.files = {"a": make_pdf(1)}
    remote.script = [[page(f("a"))]]
    [run_id] = sync(connection).counts.run_ids
    assert drive(run_id).status == "succeeded"
    document = Document.objects.get(runs=run_id)
    # What a store killed between writing its bytes and its commit leaves behind.
    lost = document_write_key(
        organisation_id=document.organisation_id,
        document_id=document.id,
        version=document.version,
        kind="pdf",
    )
    storage_put(key=lost, content=io.BytesIO(make_pdf(1, label="Lost")))
    assert storage_exists(key=lost)

    swept = stored_orphans_remove(
        older_than=timezone.now() + timedelta(seconds=5), limit=100, examine=1000
    )

    assert swept.removed == 1
    assert media_files() == [document.storage_key]


def test_a_file_deleted_and_restored_as_it_was_is_searchable_again_charged_once(
    remote, connection, org
):
    remote.files = {"a": make_pdf(2)}
    remote.script = [
        [page(f("a"), cursor="d1")],
        [page(f("a", deleted=True), cursor="d2")],
        [page(f("a"), cursor="d3")],
        [page(f("a"), cursor="d4")],
    ]
    [run_id] = sync(connection).counts.run_ids
    drive(run_id)
    document = Document.objects.get(runs=run_id)
    chunks = sorted(Chunk.objects.filter(document=document).values_list("id", flat=True))
    assert chunks
    assert sync(connection).counts.deleted == 1
    assert not Chunk.objects.filter(document=document).exists()

    again = sync(connection)

    # The same run makes its chunks again from the text kept; no new run, no new charge.
    assert again.counts.run_ids == []
    run = ImportRun.objects.get(id=run_id)
    assert (run.status, run.stage) == ("queued", "embed")
    transition = run.transitions.order_by("-id").first()
    assert (transition.from_status, transition.from_stage) == ("succeeded", "settle")
    assert "back at its source" in transition.reason
    assert drive(run_id).status == "succeeded"
    assert sync(connection).counts.run_ids == []  # listed again: nothing more
    assert ImportRun.objects.get(id=run_id).status == "succeeded"
    document.refresh_from_db()
    assert document.source_deleted_at is None and document.chunk_count == len(chunks)
    assert sorted(Chunk.objects.filter(document=document).values_list("id", flat=True)) == chunks
    assert [(u.document_version, u.pages) for u in document.usage.all()] == [(1, 2)]
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (2, 0)
    connection_refresh_imports(connection=connection)
    assert ConnectorImport.objects.get(file_id="a").state == "imported"


def test_a_file_back_to_an_earlier_content_is_a_new_version(remote, connection):
    first, second = make_pdf(1, label="First"), make_pdf(2, label="Second")
    # Versions as OneDrive for Business gives them: the content's hash.
    remote.script = [
        [page(f("a", "hash-1"))],
        [page(f("a", "hash-2"))],
        [page(f("a", "hash-1"))],
        [page(f("a", "hash-1"))],  # the same event again
        [page(f("a", "hash-2"))],
    ]
    document = None
    for data in (first, second, first):
        remote.files = {"a": data}
        [run_id] = sync(connection).counts.run_ids
        assert drive(run_id).status == "succeeded"
        document = Document.objects.get(runs=run_id)
    assert sync(connection).counts.run_ids == []
    remote.files = {"a": second}
    [run_id] = sync(connection).counts.run_ids
    assert drive(run_id).status == "succeeded"

    document.refresh_from_db()
    assert (document.version, document.page_count) == (4, 2)
    assert document.sha256 == hashlib.sha256(second).hexdigest()
    charged = [(u.document_version, u.pages) for u in document.usage.order_by("document_version")]
    assert charged == [(1, 1), (2, 2), (3, 1), (4, 2)]
    versions = list(
        ConnectorImport.objects.order_by("id").values_list("content_version", flat=True)
    )
    assert versions == ["hash-1", "hash-2", "hash-1#2", "hash-2#2"]


def test_the_loop_syncs_due_connections_and_keeps_providers_upkeep(remote, connection, org):
    later = Connection.objects.create(
        organisation=org,
        provider="onedrive",
        folder_id="LATER",
        folder_path="/Later",
        created_by=signer(org),
    )
    Connection.objects.filter(id=later.id).update(next_sync_at=timezone.now() + timedelta(hours=1))
    remote.script = [[page(f("a"), cursor="d1")]]

    assert connectors_sync_due(owner="loop-test") == 1
    assert remote.script == []  # only the due connection was listed
    connection.refresh_from_db()
    assert connection.cursor == "d1"

    remote.maintain_error = NeedsReconnect("The refresh token was refused.")
    connectors_maintain()
    assert set(Connection.objects.values_list("status", "last_error")) == {
        ("needs_reconnect", "The refresh token was refused.")
    }
    # The upkeep's change is in each connection's history, as a sync's would be.
    changes = ConnectionEvent.objects.filter(action="sync").values_list(
        "connection", "status_before", "status_after", "actor"
    )
    assert sorted(changes) == [
        (c.id, "active", "needs_reconnect", f"connector:{c.provider}:{c.id}")
        for c in sorted([connection, later], key=lambda c: c.id)
    ]
    assert connectors_sync_due(owner="loop-test") == 0


def delete_document_of(run_id) -> Document:
    document = Document.objects.get(runs=run_id)
    document_delete(document=document, actor=Actor("user:alice"))
    return document


def test_a_new_version_of_a_file_whose_document_was_deleted_is_recorded_not_imported(
    remote, connection, org
):
    remote.files = {"a": make_pdf(2, label="First")}
    remote.script = [[page(f("a", "v1"))], [page(f("a", "v2"))], [page(f("a", "v2"))]]
    [run_id] = sync(connection).counts.run_ids
    assert drive(run_id).status == "succeeded"
    document = delete_document_of(run_id)
    remote.files = {"a": make_pdf(5, label="Second")}

    edited = sync(connection)

    assert edited.sync.result == "ok" and edited.counts.run_ids == []
    assert edited.counts.skipped == 1
    record = ConnectorImport.objects.get(file_id="a", content_version="v2")
    assert record.state == "skipped" and "deleted in Paperlane" in record.reason
    assert ConnectorImport.objects.get(content_version="v1").state == "skipped"
    assert sync(connection).counts.run_ids == []  # listed again: nothing more
    document.refresh_from_db()
    assert (document.version, document.chunk_count) == (1, 0)
    assert document.deleted_at is not None and not Chunk.objects.exists()
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (2, 0)
    assert connection.files_imported == 0 and connection.files_skipped == 2


def test_a_deleted_documents_file_deleted_and_restored_at_its_source_stays_out(remote, connection):
    remote.files = {"a": make_pdf(2)}
    remote.script = [
        [page(f("a"), cursor="d1")],
        [page(f("a", deleted=True), cursor="d2")],
        [page(f("a"), cursor="d3")],
    ]
    [run_id] = sync(connection).counts.run_ids
    drive(run_id)
    document = delete_document_of(run_id)
    assert sync(connection).counts.deleted == 1

    back = sync(connection)

    assert back.counts.run_ids == []
    run = ImportRun.objects.get(id=run_id)
    assert (run.status, run.stage) == ("succeeded", "settle")  # not sent back to embed
    assert not Chunk.objects.filter(document=document).exists()
    connection_refresh_imports(connection=connection)
    assert ConnectorImport.objects.get(file_id="a").state == "deleted"


def test_a_run_that_finds_its_files_document_deleted_is_skipped_without_a_charge(
    remote, connection, org
):
    remote.files = {"a": make_pdf(1)}
    remote.script = [[page(f("a", "v1"))], [page(f("a", "v2"))]]
    [first] = sync(connection).counts.run_ids
    drive(first)
    # The new version's run is recorded before the deletion; it has no document yet.
    [second] = sync(connection).counts.run_ids
    delete_document_of(first)

    run = drive(second)

    assert (run.status, run.stage, run.error_code) == ("failed", "create", "document_deleted")
    connection_refresh_imports(connection=connection)
    record = ConnectorImport.objects.get(content_version="v2")
    assert record.state == "skipped" and "deleted in Paperlane" in record.reason
    assert Document.objects.get(runs=first).version == 1
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (1, 0)


def test_a_store_that_finds_the_document_deleted_meanwhile_keeps_nothing(
    remote, connection, org, media_files
):
    remote.script = [[page(f("a", "v1"))], [page(f("a", "v2"))]]
    remote.files = {"a": make_pdf(1)}
    [first] = sync(connection).counts.run_ids
    drive(first)
    document = Document.objects.get(runs=first)
    [second] = sync(connection).counts.run_ids
    assert execute_stage(str(second), "create")["outcome"] == "succeeded"

    def deleted_during_the_download():
        # As a deletion that locked the document's runs just before this one joined them.
        document_mark_deleted(document=Document.objects.get(id=document.id), deleted_by="test")
        return make_pdf(3)

    remote.files = {"a": deleted_during_the_download}

    run = drive(second)

    assert (run.status, run.error_code) == ("failed", "document_deleted")
    document.refresh_from_db()
    assert document.version == 1
    # Only the first version's bytes (the deletion's own removal runs after its commit).
    assert media_files() == [document.storage_key]
    org.refresh_from_db()
    assert (org.pages_used, org.pages_reserved) == (1, 0)


def test_deleting_a_connected_files_document_removes_every_stored_version(
    remote, connection, media_files
):
    remote.script = [[page(f("a", "v1"))], [page(f("a", "v2"))]]
    for label in ("First", "Second"):
        remote.files = {"a": make_pdf(1, label=label)}
        [run_id] = sync(connection).counts.run_ids
        assert drive(run_id).status == "succeeded"
    assert len(media_files()) == 2  # the first version's bytes wait for the orphan sweep

    delete_document_of(run_id)

    assert media_files() == []


def test_a_tree_deleted_folder_by_folder_is_looked_up_once_from_its_root():
    assert _outermost(["/a/b/", "/a/", "/a/b/c/", "/ab/", "/z/", "/a/"]) == ["/a/", "/ab/", "/z/"]
