"""Sync one connection: list its changes page by page, record each file version once,
start a run for each new one, and save the cursor only after a page is recorded.

A file version is recorded under its import key (organisation, connection, file
id, content version), unique in the database, in the same transaction as the run
that imports it: a repeated page, a repeated notification or a sync killed
between recording a page and saving the cursor (the next sync lists the page
again) finds the key taken and starts nothing. One sync of a connection runs at
a time: it holds a lease on the connection's row taken by a conditional UPDATE.
"""

import logging
import os
import socket
from dataclasses import dataclass, field, replace
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Max, OuterRef, Q, Subquery
from django.utils import timezone

from connectors.base import ChangePage, NeedsReconnect, ProviderBusy, ProviderError, RemoteFile
from connectors.folders import files_left_under, folders_forget_unseen, folders_record
from connectors.models import Connection, ConnectionSync, ConnectorImport
from connectors.problems import Problem, file_name_refused, problem_text
from connectors.registry import provider_for
from connectors.source import CONNECTION_DISCONNECTED, DELETED_HERE, DUPLICATE
from connectors.status import SYNCING, connection_move
from core.errors import InvalidUpload
from core.text import ascii_number, printable
from documents.services.content import (
    document_has_chunks,
    document_mark_source_deleted,
    document_mark_source_restored,
    document_rename,
)
from documents.services.quota import quota_hold_later
from formats.base import SUPPORTED_KINDS, kind_by_name
from pipeline.models import ACTIVE_STATUSES, ImportRun, RunPriority, RunSource, RunStatus
from pipeline.services.accept import filename_validate
from pipeline.services.transitions import Actor, run_begin, run_move

logger = logging.getLogger(__name__)

Status = Connection.Status
Result = Connection.Result
State = ConnectorImport.State

# The longest pause between failed syncs of one connection.
MAX_BACKOFF_SECONDS = 3600
# A connection pauses itself after this many failed syncs in a row.
MAX_FAILURES = 5
# One sync holds its connection this long, renewed with every page.
SYNC_LEASE_SECONDS = 120
# Between a provider's version and the count of its appearances in the content version
# of a file that came back to a content it had before ("<hash>#2").
AGAIN = "#"


class SyncLeaseLost(Exception):
    """Another host took the connection's sync (this one stalled past its lease)."""


@dataclass
class PageCounts:
    seen: int = 0
    started: int = 0
    skipped: int = 0
    deleted: int = 0
    # The runs started, for the caller (and tests) to follow.
    run_ids: list = field(default_factory=list)


def sync_owner_name() -> str:
    return f"{socket.gethostname()}.{os.getpid()}"


def connector_actor(connection: Connection) -> Actor:
    return Actor(f"connector:{connection.provider}:{connection.id}")


def sync_interval(connection: Connection) -> float:
    return settings.PAPERLANE_CONNECTOR_SYNC_SECONDS.get(connection.provider, 900)


def is_supported(name: str) -> bool:
    """Checked by name here; the stages check the content."""
    return kind_by_name(name) is not None


# --- Taking and giving back the sync --------------------------------------------------


def connection_due_q(now) -> Q:
    """Connections due to sync at `now`: their time came, or a sync was asked for ("sync
    now", a change notification) while no wait runs that the provider asked for (busy,
    Retry-After) or that failures earned (the error backoff)."""
    waiting = Q(next_sync_at__gt=now, last_sync_result__in=[Result.BUSY, Result.FAILED])
    return (
        Q(next_sync_at__isnull=True)
        | Q(next_sync_at__lte=now)
        | (Q(sync_requested_at__isnull=False) & ~waiting)
    )


def connection_claim_sync(
    *, connection_id: int, owner: str, only_due: bool = True
) -> Connection | None:
    """Take the sync of a connection for `owner`, or None: not syncing (paused, needs
    reconnect), not due (`connection_due_q`), or synced elsewhere right now. One
    conditional UPDATE decides, so two hosts never both sync one connection."""
    now = timezone.now()
    candidates = Connection.objects.filter(id=connection_id, status__in=SYNCING).filter(
        Q(sync_lease_until__isnull=True) | Q(sync_lease_until__lt=now)
    )
    if only_due:
        candidates = candidates.filter(connection_due_q(now))
    lease = now + timedelta(seconds=SYNC_LEASE_SECONDS)
    if candidates.update(sync_owner=owner, sync_lease_until=lease) != 1:
        return None
    return Connection.objects.select_related("organisation").get(id=connection_id)


def _renew(connection: Connection, owner: str) -> None:
    lease = timezone.now() + timedelta(seconds=SYNC_LEASE_SECONDS)
    if not Connection.objects.filter(id=connection.id, sync_owner=owner).update(
        sync_lease_until=lease
    ):
        raise SyncLeaseLost(f"connection {connection.id}")


def _release(connection: Connection, owner: str) -> None:
    Connection.objects.filter(id=connection.id, sync_owner=owner).update(
        sync_owner="", sync_lease_until=None
    )


# --- Recording a page -----------------------------------------------------------------


def _start_run(connection: Connection, *, path: str, version: str) -> ImportRun:
    """The run that imports the file at `path` in its `version`: bulk priority, from
    `create`; its pages are held once its bytes are stored and counted (the store stage)."""
    run, found = run_begin(
        actor=connector_actor(connection),
        reason=f"found {path} (version {version})",
        organisation_id=connection.organisation_id,
        document=None,
        reservation=quota_hold_later(organisation_id=connection.organisation_id),
        source=RunSource.CONNECTOR,
        priority=RunPriority.BULK,
    )
    run.save(force_insert=True)
    found.save(force_insert=True)
    return run


def _mark_deleted(connection: Connection, file_ids: list[str]) -> int:
    """Record that these files were deleted at the source; their documents are marked."""
    if not file_ids:
        return 0
    records = ConnectorImport.objects.filter(connection=connection, file_id__in=file_ids).exclude(
        state=State.DELETED
    )
    document_ids = list(
        records.exclude(document=None).values_list("document_id", flat=True).distinct()
    )
    gone = set(records.values_list("file_id", flat=True))
    records.update(state=State.DELETED, reason="Deleted at the source.", updated_at=timezone.now())
    document_mark_source_deleted(
        document_ids=document_ids,
        remove_chunks=settings.PAPERLANE_CONNECTOR_DELETE_REMOVES_CHUNKS,
    )
    return len(gone)


def _as_recorded(remote: RemoteFile) -> RemoteFile:
    """`remote` under the name an upload of it would be kept by (filename_validate: NFKC,
    no folders, control characters or more than 200 characters) or, when an upload would
    be refused for its name, under its name with what cannot be shown written out
    (core/text.py `printable`) and the refusal as its problem. Its path is shown so too."""
    path = printable(remote.path)
    try:
        name = filename_validate(remote.name)
    except InvalidUpload as exc:
        problem = remote.problem or file_name_refused(exc.message)
        return replace(remote, name=printable(remote.name), path=path, problem=problem)
    return replace(remote, name=name, path=path)


def _skip_reason(remote: RemoteFile) -> str:
    suffix = os.path.splitext(remote.name)[1].lower() or "without an extension"
    return f"Only {SUPPORTED_KINDS} files are imported; this file is {suffix}."


def connection_record_page(
    *, connection: Connection, page: ChangePage, listed_since=None
) -> PageCounts:
    """Record one page of changes in one transaction: a new import (and its run) for each
    file version not recorded before, deletions, and what the listing saw. Recording a
    page again records nothing new."""
    counts = PageCounts()
    now = timezone.now()
    # The same item can appear twice in one listing; its last state counts.
    latest: dict[str, RemoteFile] = {}
    for remote in page.files:
        latest.pop(remote.file_id, None)
        latest[remote.file_id] = remote
    present = [_as_recorded(f) for f in latest.values() if not f.deleted]
    deleted = [f.file_id for f in latest.values() if f.deleted]
    counts.seen = len(present)
    with transaction.atomic():
        if page.restarted:
            # Everything is listed again: what was imported and is not listed by the end
            # was deleted meanwhile (reconciled when the listing completes).
            connection.reconcile_since = listed_since or now
            Connection.objects.filter(id=connection.id).update(
                reconcile_since=connection.reconcile_since
            )
        # Folders with the files they were listed with. One deleted with its contents may
        # leave files recorded under it that the listing did not list as deleted.
        deleted_paths = folders_record(connection=connection, folders=page.folders, now=now)
        if deleted_paths:
            listed = {f.file_id for f in present}
            left = files_left_under(
                connection=connection, paths=deleted_paths, since=listed_since or now
            )
            deleted += [file_id for file_id in left if file_id not in listed]
        # Deletions first: a file moved within the folder, listed at its new place in
        # the same page, is then found below as moved rather than new.
        counts.deleted = _mark_deleted(connection, deleted)
        ids = [f.file_id for f in present]
        known = ConnectorImport.objects.filter(connection=connection, file_id__in=ids)
        imports_of: dict[str, list[ConnectorImport]] = {}
        for r in known.order_by("id"):
            imports_of.setdefault(r.file_id, []).append(r)
        known.update(seen_at=now)
        # Files whose document a person deleted here: they stay out, whatever comes.
        deleted_here = set(
            known.filter(document__deleted_at__isnull=False).values_list("file_id", flat=True)
        )
        moved_from = _moved_away(connection, [f for f in present if f.file_id not in imports_of])
        restored = []
        for remote in present:
            imports = imports_of.get(remote.file_id, [])
            if not imports and remote.version in moved_from:
                moved = _follow_move(moved_from.pop(remote.version), remote)
                if not _deleted_here(moved):
                    restored.append(moved)
                continue
            if (
                imports
                and _is_version(imports[-1], remote.version)
                and not _fit_again(imports[-1], remote)
            ):
                # The file's latest recorded version: nothing new (back, if it was deleted;
                # elsewhere, if it or a folder above it was moved or renamed).
                _follow_place(imports[-1], remote)
                if imports[-1].state == State.DELETED and remote.file_id not in deleted_here:
                    restored.append(imports[-1])
                continue
            # An earlier version back (content reverted, as a hash-versioned OneDrive for
            # Business reports it) is a new document version: recorded under its own key.
            before = sum(_is_version(r, remote.version) for r in imports)
            content_version = f"{remote.version}{AGAIN}{before + 1}" if before else remote.version
            if remote.file_id in deleted_here:
                # A new version of a file whose document was deleted: recorded, not imported
                # (nor charged); the deletion was a person's decision about the file.
                state, reason = State.SKIPPED, DELETED_HERE
            elif remote.problem:
                # The file itself keeps it out (its name, its links): a person must act.
                state, reason = State.FAILED, remote.problem
            elif not is_supported(remote.name):
                state, reason = State.SKIPPED, _skip_reason(remote)
            else:
                state, reason = State.QUEUED, ""
            path = remote.path[:2048]
            run = None
            if state == State.QUEUED:
                run = _start_run(connection, path=path, version=content_version)
            ConnectorImport.objects.create(
                organisation_id=connection.organisation_id,
                connection=connection,
                file_id=remote.file_id,
                content_version=content_version,
                name=remote.name[:255],
                path=path,
                size_bytes=remote.size,
                run=run,
                state=state,
                reason=reason,
                seen_at=now,
            )
            if run is not None:
                counts.run_ids.append(run.id)
                counts.started += 1
            else:
                counts.skipped += 1
        if restored:
            # Back at the source as it was: its state follows its run again.
            ConnectorImport.objects.filter(id__in=[r.id for r in restored]).update(
                state=State.QUEUED, reason=""
            )
            document_mark_source_restored(
                document_ids=[r.document_id for r in restored if r.document_id]
            )
            for record in restored:
                _search_again(connection, record)
    return counts


def _moved_away(connection: Connection, new: list[RemoteFile]) -> dict[str, ConnectorImport]:
    """Of the files listed for the first time, those whose exact version was last seen
    under another id that has since gone (a local file moved or renamed within the
    folder keeps its size, modification time and bytes): {version: that file's latest
    import}. Such a file is the same document, not a new one to charge again. A file that
    never became a document (skipped for its type, failed for its name) is new where it
    went: what kept it out is judged again there."""
    versions = {f.version for f in new if f.version}
    if not versions:
        return {}
    gone = ConnectorImport.objects.filter(
        connection=connection, state=State.DELETED, content_version__in=versions
    ).order_by("id")
    candidates = {record.file_id: record for record in gone}
    latest = {
        file_id: last
        for file_id, last, documents in ConnectorImport.objects.filter(
            connection=connection, file_id__in=list(candidates)
        )
        .values("file_id")
        .annotate(last=Max("id"), documents=Count("document"))
        .values_list("file_id", "last", "documents")
        if documents
    }
    return {
        record.content_version: record
        for record in candidates.values()
        if latest.get(record.file_id) == record.id
    }


def _follow_move(record: ConnectorImport, remote: RemoteFile) -> ConnectorImport:
    """Every import of the moved file now goes by its new id; its latest one by its new
    name and place, and its document by the new name."""
    ConnectorImport.objects.filter(
        connection_id=record.connection_id, file_id=record.file_id
    ).update(file_id=remote.file_id, updated_at=timezone.now())
    record.file_id, record.name, record.path = remote.file_id, remote.name[:255], remote.path[:2048]
    record.save(update_fields=["name", "path", "updated_at"])
    if record.document_id and not remote.problem:
        document_rename(document_id=record.document_id, filename=record.name)
    return record


def _fit_again(record: ConnectorImport, remote: RemoteFile) -> bool:
    """Whether `record`, not imported for a problem of its file (its name, its links), is
    of a file that has none now (renamed at its source, without changing its content):
    it is recorded again, and imported."""
    return record.state == State.FAILED and record.run_id is None and not remote.problem


def _deleted_here(record: ConnectorImport) -> bool:
    return record.document is not None and record.document.deleted_at is not None


def _follow_place(record: ConnectorImport, remote: RemoteFile) -> None:
    """The file's latest import goes by its name and place now, and its document by the
    name: no new import, nothing charged."""
    name, path = remote.name[:255], remote.path[:2048]
    if not path or (record.name, record.path) == (name, path):
        return
    renamed = record.name != name
    record.name, record.path = name, path
    record.save(update_fields=["name", "path", "updated_at"])
    # A name an upload would refuse is the import's to show, never the document's.
    if renamed and record.document_id and not remote.problem:
        document_rename(document_id=record.document_id, filename=name)


def _is_version(record: ConnectorImport, version: str) -> bool:
    """Whether `record` is the file at the provider's `version` (or one of its returns)."""
    recorded = record.content_version
    if recorded == version:
        return True
    head, sep, count = recorded.rpartition(AGAIN)
    return bool(sep) and head == version and ascii_number(count) is not None


def _search_again(connection: Connection, record: ConnectorImport) -> None:
    """A file back at its source as it was: if its deletion took its chunks out of search,
    its run goes back to `embed` to make them again from the text kept. Its settle then
    finds its reservation settled and charges nothing; a run not succeeded goes on (or
    waits for a retry) as it was."""
    run = (
        ImportRun.objects.select_for_update(of=("self",))
        .select_related("document")
        .filter(id=record.run_id)
        .first()
    )
    if run is None or run.status != RunStatus.SUCCEEDED or run.document is None:
        return
    document = run.document
    if record.document_version != document.version or document_has_chunks(document=document):
        return
    run_move(
        run=run,
        move="reembed",
        actor=connector_actor(connection),
        reason=f"{record.path} is back at its source: its chunks are made again",
    )


def connection_save_cursor(*, connection: Connection, owner: str, cursor: str) -> None:
    """Save where the next listing starts; only by the sync that holds the connection."""
    if not Connection.objects.filter(id=connection.id, sync_owner=owner).update(cursor=cursor):
        raise SyncLeaseLost(f"connection {connection.id}")
    connection.cursor = cursor


def _reconcile(connection: Connection) -> int:
    """After a restarted listing completed: files imported before and not listed since
    were deleted at the source."""
    since = Connection.objects.values_list("reconcile_since", flat=True).get(id=connection.id)
    if since is None:
        return 0
    with transaction.atomic():
        stale = (
            ConnectorImport.objects.filter(connection=connection)
            .exclude(state=State.DELETED)
            .values("file_id")
            .annotate(last_seen=Max("seen_at"))
            .filter(last_seen__lt=since)
            .values_list("file_id", flat=True)
        )
        deleted = _mark_deleted(connection, list(stale))
        folders_forget_unseen(connection=connection, since=since)
        Connection.objects.filter(id=connection.id).update(reconcile_since=None)
    connection.reconcile_since = None
    return deleted


# --- Following the runs ---------------------------------------------------------------


def connection_refresh_imports(*, connection: Connection) -> None:
    """Bring imports' states in line with their runs (imported, failed and why, or
    importing again after a retry) and the connection's counts with its imports."""
    mine = ConnectorImport.objects.filter(connection=connection)
    run_error = ImportRun.objects.filter(id=OuterRef("run_id")).values("error_message")
    mine.filter(state=State.QUEUED, run__status=RunStatus.SUCCEEDED).update(
        state=State.IMPORTED, reason=""
    )
    # Replaced by a newer version of its file, or its document deleted here, before it was
    # imported: not a failure.
    mine.filter(
        state=State.QUEUED,
        run__status=RunStatus.FAILED,
        run__error_code__in=["superseded", "document_deleted", CONNECTION_DISCONNECTED],
    ).update(state=State.SKIPPED, reason=Subquery(run_error[:1]))
    # Its bytes are a live document's: the store noted which (`duplicate_of`).
    mine.filter(state=State.QUEUED, run__status=RunStatus.FAILED, run__error_code=DUPLICATE).update(
        state=State.DUPLICATE, reason=Subquery(run_error[:1])
    )
    mine.filter(state=State.QUEUED, run__status=RunStatus.CANCELLED).update(
        state=State.SKIPPED, reason="Cancelled before it was imported."
    )
    mine.filter(
        state=State.QUEUED, run__status__in=[RunStatus.FAILED, RunStatus.DEAD_LETTER]
    ).update(state=State.FAILED, reason=Subquery(run_error[:1]))
    retried = [State.FAILED, State.IMPORTED, State.SKIPPED, State.DUPLICATE]
    mine.filter(state__in=retried, run__status__in=ACTIVE_STATUSES).update(
        state=State.QUEUED, reason="", duplicate_of=None
    )
    by_state = dict(mine.values_list("state").annotate(n=Count("id")).values_list("state", "n"))
    seen = mine.exclude(state=State.DELETED).values("file_id").distinct().count()
    Connection.objects.filter(id=connection.id).update(
        files_seen=seen,
        files_imported=by_state.get(State.IMPORTED, 0),
        # A duplicate was skipped: its document is there already.
        files_skipped=by_state.get(State.SKIPPED, 0) + by_state.get(State.DUPLICATE, 0),
        files_failed=by_state.get(State.FAILED, 0),
    )


# --- One sync -------------------------------------------------------------------------


@dataclass
class SyncOutcome:
    sync: ConnectionSync
    counts: PageCounts


def _finish(
    connection: Connection,
    sync: ConnectionSync,
    counts: PageCounts,
    *,
    result: str,
    error: str = "",
    problem: str = "",
    retry_after: float | None = None,
) -> None:
    """Record how the sync ended on it and on its connection. `error` is the technical
    message (kept for operators); members are told the `problem` kind in plain words,
    and a status the sync sets says it plainly too."""
    now = timezone.now()
    problem = problem or (Problem.UNKNOWN if error else "")
    sync.finished_at, sync.result, sync.error = now, result, error[:5000]
    sync.problem = problem
    sync.files_seen, sync.imports_started = counts.seen, counts.started
    sync.files_skipped, sync.files_deleted = counts.skipped, counts.deleted
    # The history keeps syncs that found something or went wrong; a quiet poll (a local
    # folder every few seconds) only moves the connection's last sync time.
    if result != Result.OK or counts.seen or counts.deleted:
        sync.save()
    with transaction.atomic():
        # The cursor (a local folder's is JSON of every file) is neither read nor written
        # here: the sync saved it already if it changed (connection_save_cursor).
        row = Connection.objects.select_for_update().defer("cursor").get(id=connection.id)
        plain = problem_text(problem, provider=row.get_provider_display())
        row.last_sync_at, row.last_sync_result = now, result
        row.last_error, row.last_problem = error, problem
        interval = sync_interval(row)
        # The move of connectors/status.py the sync's end makes, and why.
        move, reason = None, plain
        if result == Result.OK:
            row.consecutive_failures = 0
            if row.status == Status.ERROR:
                move, reason = "recover", ""
            row.next_sync_at = now + timedelta(seconds=interval)
        elif result == Result.BUSY:
            row.next_sync_at = now + timedelta(seconds=max(retry_after or 0, 1))
        elif result == Result.NEEDS_RECONNECT:
            move = "lose_access"
        elif problem == Problem.FOLDER_REFUSED:
            # Not reading the folder is this server's rule: asking again cannot help, an
            # operator allows the folder and a person resumes the connection.
            row.consecutive_failures += 1
            move = "give_up"
        else:
            row.consecutive_failures += 1
            failures = row.consecutive_failures
            if failures >= MAX_FAILURES:
                move = "give_up"
                reason = f"Paused after {failures} failed syncs in a row. {plain}"
            else:
                move = "fail"
            backoff = min(interval * 2 ** (failures - 1), MAX_BACKOFF_SECONDS)
            row.next_sync_at = now + timedelta(seconds=backoff)
        # A request made before this sync started is answered by it.
        if row.sync_requested_at is not None and row.sync_requested_at <= sync.started_at:
            row.sync_requested_at = None
        # A person's pause (or disconnection) stays, whatever the sync met.
        if move is not None and row.status in SYNCING:
            connection_move(
                connection=row,
                move=move,
                actor=connector_actor(row),
                reason=reason,
                also_save=FINISH_FIELDS,
            )
        else:
            row.save(update_fields=FINISH_FIELDS)
    _refresh_but_cursor(connection)


# What finishing a sync changes on the connection's row.
FINISH_FIELDS = [
    "last_sync_at",
    "last_sync_result",
    "last_error",
    "last_problem",
    "consecutive_failures",
    "next_sync_at",
    "sync_requested_at",
    "updated_at",
]


def _refresh_but_cursor(connection: Connection) -> None:
    """Reload the row but its cursor: the sync keeps the one it saved (or read) itself."""
    connection.refresh_from_db(
        fields=[
            f.attname
            for f in Connection._meta.concrete_fields
            if f.name != "cursor" and not f.primary_key
        ]
    )


def connection_sync(
    *, connection: Connection, owner: str | None = None, only_due: bool = False
) -> SyncOutcome | None:
    """Sync `connection` once if this caller can take it (None when another sync holds
    it, or it is not active or not due). Provider trouble is recorded on the
    connection, never raised: busy waits, revoked consent needs a reconnect, other
    failures count toward pausing the connection."""
    owner = owner or sync_owner_name()
    claimed = connection_claim_sync(connection_id=connection.id, owner=owner, only_due=only_due)
    if claimed is None:
        return None
    sync = ConnectionSync(connection=claimed, started_at=timezone.now())
    counts = PageCounts()
    try:
        provider = provider_for(claimed)
        for page in provider.changes(claimed, claimed.cursor or None):
            _renew(claimed, owner)
            page_counts = connection_record_page(
                connection=claimed, page=page, listed_since=sync.started_at
            )
            counts.seen += page_counts.seen
            counts.started += page_counts.started
            counts.skipped += page_counts.skipped
            counts.deleted += page_counts.deleted
            counts.run_ids += page_counts.run_ids
            if page.cursor is not None and page.cursor != claimed.cursor:
                connection_save_cursor(connection=claimed, owner=owner, cursor=page.cursor)
        counts.deleted += _reconcile(claimed)
    except ProviderBusy as exc:
        _finish(
            claimed,
            sync,
            counts,
            result=Result.BUSY,
            error=exc.message,
            problem=exc.kind,
            retry_after=exc.retry_after,
        )
    except NeedsReconnect as exc:
        _finish(
            claimed,
            sync,
            counts,
            result=Result.NEEDS_RECONNECT,
            error=exc.message,
            problem=exc.kind,
        )
    except SyncLeaseLost:
        logger.warning("connection %s: sync lease lost; another host syncs it", claimed.id)
        sync.finished_at, sync.result = timezone.now(), Result.FAILED
        sync.error = "Stopped: the sync was taken over by another worker."
        sync.problem = Problem.INTERRUPTED
        sync.save()
        return SyncOutcome(sync=sync, counts=counts)
    except Exception as exc:  # any other failure counts toward pausing the connection
        logger.warning("connection %s: sync failed", claimed.id, exc_info=True)
        if isinstance(exc, ProviderError):
            message, problem = exc.message, exc.kind
        else:
            # Kept for operators (the admin); members read only the kind, in plain words.
            message, problem = f"{type(exc).__name__}: {exc}", Problem.UNKNOWN
        _finish(claimed, sync, counts, result=Result.FAILED, error=message, problem=problem)
    else:
        _finish(claimed, sync, counts, result=Result.OK)
    finally:
        _release(claimed, owner)
        connection_refresh_imports(connection=claimed)
    _refresh_but_cursor(claimed)
    return SyncOutcome(sync=sync, counts=counts)
