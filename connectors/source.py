"""Connected folders as a source of runs (pipeline/sources.py): `create` makes (or finds)
the document of the file, `store` fetches its bytes, counts its pages and holds them,
and a document deleted here keeps its file's imports out.

Every version of one file is the same document: an edit is a new document version,
stored under a key that its store alone writes and charged for its own pages. The
pages are held as soon as the bytes are counted, before any extraction: a file that
does not fit fails "over quota" at once and can be retried once the limit is raised.

Bytes the organisation already has in a live document (an upload, another file, this
file's current version: documents/services/duplicates.py) are not stored or charged
again: the run fails `duplicate` (its pages given back) and its import says which
document has them (`duplicate_of`), shown as a duplicate among the connection's files.
"""

import hashlib
import logging
import tempfile
import time
import uuid

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from connectors.base import FolderRefused, NeedsReconnect, ProviderBusy, ProviderError
from connectors.models import Connection, ConnectorImport
from connectors.problems import Problem, problem_text
from connectors.registry import provider_for
from connectors.selectors import connection_signed_in_by_former_member
from core.errors import QuotaExceeded
from documents.models import Document
from documents.reading import inspect_upload
from documents.services.duplicates import document_duplicate_of
from documents.services.quota import quota_resize
from documents.storage import (
    document_storage_key,
    document_write_key,
    storage_delete,
    storage_put,
)
from formats.base import PDF, kind_by_name
from pipeline.errors import PermanentError, TransientError
from pipeline.models import ACTIVE_STATUSES, ImportRun
from pipeline.services.people import run_cancel
from pipeline.services.transitions import Actor
from pipeline.stages.context import StageContext

logger = logging.getLogger(__name__)

State = ConnectorImport.State
# The reason a connected file's imports give once its document was deleted here.
DELETED_HERE = "Its document was deleted in Paperlane; new versions are not imported."
# The error code of a file's run whose bytes the organisation has already.
DUPLICATE = "duplicate"
# The error code of a file's run whose connection was disconnected before it was fetched.
CONNECTION_DISCONNECTED = "connection_disconnected"
# ... and of one whose folder reads with the sign-in of someone who left.
CONNECTED_BY_FORMER_MEMBER = "connected_by_former_member"
READ_BLOCK = 1024 * 1024
# Downloads up to this size stay in memory; larger ones spill to a temporary file.
SPOOL_BYTES = 8 * 1024 * 1024
# The store stage's download of one file takes at most this long (its size is bounded
# as an upload's, by PAPERLANE_MAX_UPLOAD_BYTES).
DOWNLOAD_SECONDS = 60.0


def _import_of(run: ImportRun) -> ConnectorImport:
    record = ConnectorImport.objects.select_related("connection").filter(run_id=run.id).first()
    if record is None:
        raise PermanentError(
            "The connected file this import was for is no longer recorded "
            "(its connection was removed).",
            code="import_missing",
        )
    return record


def _check_connected(record: ConnectorImport) -> None:
    """A disconnected connection's files are not fetched any more (nor documents made),
    nor those of a OneDrive folder connected with the sign-in of someone who is no
    longer a member (queued before they left): their tokens are not used any more."""
    connection = record.connection
    if connection.status == Connection.Status.DISCONNECTED:
        raise PermanentError(
            f"{record.path} was not imported: its connection was disconnected first.",
            code=CONNECTION_DISCONNECTED,
        )
    if connection_signed_in_by_former_member(connection):
        raise PermanentError(
            f"{record.path} was not imported: the folder was connected with the sign-in of "
            "someone who is no longer a member. Once it is connected again, retry it.",
            code=CONNECTED_BY_FORMER_MEMBER,
        )


def connector_create(ctx: StageContext) -> None:
    """Link the run to the document of its file, made now for a file seen the first time."""
    run = ctx.run
    record = _import_of(run)
    _check_connected(record)
    with ctx.complete():
        # Every version of one file locks the file's first import: two versions created
        # at once find one document, not two.
        ConnectorImport.objects.select_for_update().filter(
            connection_id=record.connection_id, file_id=record.file_id
        ).order_by("id").first()
        record = ConnectorImport.objects.get(id=record.id)
        document = record.document
        if document is None:
            sibling = (
                ConnectorImport.objects.filter(
                    connection_id=record.connection_id,
                    file_id=record.file_id,
                    document__isnull=False,
                )
                .select_related("document")
                .order_by("-id")
                .first()
            )
            document = sibling.document if sibling else _new_document(record)
            record.document = document
            record.save(update_fields=["document", "updated_at"])
        if document.deleted_at is not None:
            raise _deleted_here(record)
        run.document = document
        run.save(update_fields=["document", "updated_at"])


def _new_document(record: ConnectorImport) -> Document:
    document_id = uuid.uuid4()
    # What its name says until its bytes are stored and checked (the store stage).
    kind = kind_by_name(record.name) or PDF
    return Document.objects.create(
        id=document_id,
        organisation_id=record.organisation_id,
        filename=record.name,
        kind=kind,
        # Known once the bytes are stored (the store stage); the remote size until then.
        size_bytes=max(record.size_bytes or 1, 1),
        sha256="",
        storage_key=document_storage_key(
            organisation_id=record.organisation_id,
            document_id=document_id,
            version=1,
            kind=kind,
        ),
    )


def _download(ctx: StageContext, connection: Connection, record: ConnectorImport):
    """The file's bytes now, fetched fresh from the provider, within the size and time
    limits: (spooled file, size, sha256)."""
    limit = settings.PAPERLANE_MAX_UPLOAD_BYTES
    too_large = PermanentError(
        f"{record.name} is larger than {limit:,} bytes, the limit for one file.",
        code="file_too_large",
    )
    if record.size_bytes is not None and record.size_bytes > limit:
        raise too_large
    deadline = time.monotonic() + DOWNLOAD_SECONDS
    spooled = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
    digest, size = hashlib.sha256(), 0
    try:
        with provider_for(connection).open(connection, record.file_id) as source:
            while block := source.read(READ_BLOCK):
                size += len(block)
                if size > limit:
                    raise too_large
                if time.monotonic() > deadline:
                    raise TransientError(
                        f"downloading {record.path} took longer than "
                        f"{DOWNLOAD_SECONDS:.0f} s",
                        code="download_timeout",
                    )
                digest.update(block)
                spooled.write(block)
                ctx.check()
    except FileNotFoundError:
        spooled.close()
        raise PermanentError(
            f"{record.path} is no longer in the connected folder.", code="source_missing"
        ) from None
    except NeedsReconnect as exc:
        spooled.close()
        raise PermanentError(
            f"The connection must be connected again: {exc.message}",
            code="connection_needs_reconnect",
        ) from exc
    except ProviderBusy as exc:
        spooled.close()
        raise TransientError(exc.message, code="provider_busy") from exc
    except FolderRefused as exc:
        spooled.close()
        # Retrying cannot help until an operator allows the folder; then a retry does.
        # Why (the server's roots and folders) is for operators: the log and the
        # attempt's traceback; the person who reads the run is told it plainly.
        logger.warning("connection %s: %s not fetched: %s", connection.id, record.path, exc.message)
        raise PermanentError(
            f"{record.path} was not imported. "
            + problem_text(Problem.FOLDER_REFUSED, provider=connection.get_provider_display()),
            code="folder_refused",
        ) from exc
    except ProviderError as exc:
        spooled.close()
        raise TransientError(exc.message, code="provider_error") from exc
    except BaseException:
        spooled.close()
        raise
    return spooled, size, digest.hexdigest()


def connector_store(ctx: StageContext) -> None:
    """Fetch the file's bytes, store them as the document's next version, count their
    pages and hold them (QuotaExceeded fails this run alone, "over quota")."""
    run = ctx.run
    record = _import_of(run)
    _check_connected(record)
    if record.state == State.DELETED:
        raise PermanentError(
            f"{record.path} was deleted at its source before it was imported.",
            code="source_deleted",
        )
    newer = (
        ConnectorImport.objects.filter(
            connection_id=record.connection_id, file_id=record.file_id, id__gt=record.id
        )
        .exclude(state__in=[State.SKIPPED, State.DELETED])
        .exists()
    )
    if newer:
        raise PermanentError(
            f"{record.path} changed again before this version was imported; the newer "
            "version is imported instead.",
            code="superseded",
        )
    spooled, size, sha256 = _download(ctx, record.connection, record)
    with spooled:
        if size == 0:
            raise PermanentError(f"{record.name} is empty.", code="empty_file")
        # A quick look before the bytes are inspected and stored; the one that decides is
        # made below, under the lock of these bytes.
        if found := document_duplicate_of(organisation_id=record.organisation_id, sha256=sha256):
            raise _duplicate(record, found)
        inspection = inspect_upload(spooled)
        document = ctx.document
        # The version this run's bytes become: the next one, unless none is stored yet.
        version = document.version + 1 if document.sha256 else document.version
        # A key of this write alone: another run of the same file (an older version still
        # downloading, a retry of this one whose worker stalled) never writes or deletes
        # it, and only the commit below points the document at it.
        key = document_write_key(
            organisation_id=document.organisation_id,
            document_id=document.id,
            version=version,
            kind=inspection.kind,
        )
        storage_put(key=key, content=spooled)
    committing = False
    try:
        with ctx.complete():
            if found := document_duplicate_of(
                organisation_id=record.organisation_id, sha256=sha256, locked=True
            ):
                raise _SameBytes(found)
            _become_version(
                ctx,
                record,
                document,
                version=version,
                key=key,
                kind=inspection.kind,
                size=size,
                sha256=sha256,
            )
            quota_resize(
                reservation=run.reservation,
                pages=inspection.pages,
                estimated=inspection.estimated,
            )
            committing = True
    except BaseException as exc:
        if not committing:
            # Rolled back before the commit, so nothing points at this key, nor ever
            # will: no other write uses it. (A failed commit leaves it to the orphan sweep.)
            _forget(key)
        if isinstance(exc, _SameBytes):
            raise _duplicate(record, exc.document) from None
        if isinstance(exc, QuotaExceeded):
            raise PermanentError(
                f"{record.path} has {inspection.pages} pages but only "
                f"{exc.extra['pages_available']} pages of your quota are left. Raise the "
                "page limit and retry it.",
                code="quota_exceeded",
            ) from exc
        raise


class _SameBytes(Exception):
    """Ends the store's transaction: the bytes are those of `document`, recorded meanwhile."""

    def __init__(self, document: Document) -> None:
        super().__init__(str(document.id))
        self.document = document


def _duplicate(record: ConnectorImport, document: Document) -> PermanentError:
    """Note on the import which document has its bytes (the sync shows it as a duplicate
    once its run has failed with the error returned). The document made for the file's
    first import, which no bytes ever reached, is put away: the list shows the document
    that has them, not an empty failed one beside it, and a later version of the file
    makes a document of its own (not one "deleted here")."""
    now = timezone.now()
    with transaction.atomic():
        put_away = (
            Document.objects.filter(id=record.document_id, sha256="", deleted_at__isnull=True)
            .exclude(id=document.id)
            .update(deleted_at=now, updated_at=now)
        )
        ConnectorImport.objects.filter(id=record.id).update(
            duplicate_of=document,
            document=None if put_away else record.document_id,
            updated_at=now,
        )
    if document.id == record.document_id:
        words = f"{record.path} has the same content as the version already imported"
    else:
        words = f"{record.path} has the same content as {document.filename}, already"
        words += " in Paperlane"
    return PermanentError(f"{words}; it was not imported or charged again.", code=DUPLICATE)


def _forget(key: str) -> None:
    try:
        storage_delete(key=key)
    except Exception:  # the orphan sweep removes it later
        logger.warning("could not delete %s, written by a store that did not commit", key)


def _become_version(
    ctx: StageContext,
    record: ConnectorImport,
    document: Document,
    *,
    version: int,
    key: str,
    kind: str,
    size: int,
    sha256: str,
) -> None:
    """Make the stored bytes the document's current version; runs of older versions still
    in the pipeline are cancelled (their content is out of date)."""
    locked = Document.objects.select_for_update().get(id=document.id)
    if locked.deleted_at is not None:  # deleted while this run fetched the file
        raise _deleted_here(record)
    if (locked.version, locked.sha256) != (document.version, document.sha256):
        raise TransientError(
            "another version of the file was stored meanwhile", code="version_changed"
        )
    older = ImportRun.objects.filter(document_id=document.id, status__in=ACTIVE_STATUSES).exclude(
        id=ctx.run.id
    )
    for stale in older:
        run_cancel(
            run=stale,
            actor=Actor(f"connector:{record.connection.provider}:{record.connection_id}"),
            reason=f"a newer version of {record.path} replaced it",
        )
    Document.objects.filter(id=document.id).update(
        version=version,
        storage_key=key,
        kind=kind,
        size_bytes=size,
        sha256=sha256,
        filename=record.name,
        page_count=None,
        text_chars=0,
        source_deleted_at=None,
    )
    # The stages after this one read the document as it is now.
    document.refresh_from_db()
    record.document_version = version
    record.save(update_fields=["document_version", "updated_at"])


def _deleted_here(record: ConnectorImport) -> PermanentError:
    return PermanentError(
        f"The document of {record.path} was deleted in Paperlane; it is not imported again.",
        code="document_deleted",
    )


class ConnectedFolderSource:
    """What the pipeline calls for a connector's run (registered in connectors/apps.py)."""

    # A run's file, with its connection: where the run came from, on its pages.
    run_related = ("connector_import__connection",)

    def create(self, ctx: StageContext) -> None:
        connector_create(ctx)

    def store(self, ctx: StageContext) -> None:
        connector_store(ctx)

    def document_deleted(self, *, document: Document) -> None:
        """The file's imports are skipped from now on: new versions of it are recorded,
        not imported (the sync reads this reason)."""
        ConnectorImport.objects.filter(document=document).exclude(state=State.DELETED).update(
            state=State.SKIPPED, reason=DELETED_HERE, updated_at=timezone.now()
        )
