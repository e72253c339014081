"""The accept path shared by the HTML upload page, the API and direct uploads.

Validate by content, ask admission control (pipeline/services/admission.py) whether
there is room, write the bytes once to their final key, then in one transaction
create the document and the run (one statement, core/inserts.py), reserve quota and
mark the first stage due. The first stage is enqueued after commit. Nothing here parses
the whole file or calls anything but storage.

`document_accept` takes a multipart upload's bytes; `pending_upload_accept` those of a
direct upload (pipeline/services/direct_uploads.py), already at their final key: they are
checked the same way and not written again. The doors people and integrations come in
by (the API, the page's script and form) call them through pipeline/services/receive.py.

Bytes the organisation already has in a live document (documents/services/duplicates.py)
are not kept or charged again unless the uploader asks for a second copy
(`allow_duplicate`): the answer is that document (`Acceptance.duplicate`). It is looked
for once their digest is taken, before they are inspected, stored or counted against the
quota, and again, under a lock, in the transaction that would record them: of two
identical uploads at once, one document is made.
"""

import hashlib
import logging
import unicodedata
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.uploadedfile import UploadedFile
from django.db import IntegrityError, transaction

from core.errors import (
    Conflict,
    FileTooLarge,
    InvalidUpload,
    ServiceError,
    StorageUnavailable,
    UnsupportedFileType,
)
from core.inserts import rows_insert
from core.text import UNPRINTABLE_CATEGORIES
from documents.models import ApiToken, Document, Organisation, PendingUpload, QuotaReservation
from documents.reading import inspect_upload
from documents.roles import Ability, ability_require
from documents.services.duplicates import document_duplicate_of
from documents.services.pending_uploads import pending_upload_mark_completed
from documents.services.quota import quota_check, quota_take
from documents.storage import (
    STORAGE_ERRORS,
    STORAGE_RETRY_AFTER_SECONDS,
    document_storage_key,
    storage_delete,
    storage_put,
)
from formats.base import DESCRIPTIONS, EXTENSIONS, Inspection
from pipeline.models import ImportRun
from pipeline.services.admission import (
    OrganisationAtBound,
    admission_check,
    admission_organisation_over,
    admission_organisation_refusal,
)
from pipeline.services.transitions import Actor, run_begin

logger = logging.getLogger(__name__)

IDEMPOTENCY_KEY_MAX = 255
# The longest file name accepted (the API's schema for direct uploads says the same).
MAX_FILENAME_LENGTH = 200


@dataclass(frozen=True)
class Acceptance:
    run: ImportRun
    document: Document
    # True when an Idempotency-Key matched an earlier request: nothing new was made.
    replayed: bool = False
    # True when the bytes are those of the organisation's live document `document`
    # (`run` is its latest run): nothing new was made, kept or charged.
    duplicate: bool = False


def filename_validate(name: str | None) -> str:
    """Return a plain, safe file name or refuse it. Never used to build paths.

    The name is judged, and kept, as NFKC makes it: fullwidth dots and solidi
    ("．．／") are "../" to a file system that folds them, and to a download's name."""
    name = unicodedata.normalize("NFKC", name or "").strip()
    if not name:
        raise InvalidUpload("The file has no name.", code="invalid_filename")
    if "/" in name or "\\" in name or name in {".", ".."} or name.startswith(".."):
        raise InvalidUpload(
            "The file name must be a plain name without folders or '..'.", code="invalid_filename"
        )
    if any(unicodedata.category(ch) in UNPRINTABLE_CATEGORIES for ch in name):
        raise InvalidUpload("The file name contains control characters.", code="invalid_filename")
    if len(name) > MAX_FILENAME_LENGTH:
        raise InvalidUpload(
            f"The file name is longer than {MAX_FILENAME_LENGTH} characters.",
            code="invalid_filename",
        )
    return name


def filename_for_kind(name: str, kind: str) -> str:
    """`name` with the extension that says what the file is: `a.txt` holding a PDF is
    stored as `a.txt.pdf`, so that a download opens in the right program. A name that
    says it already (any case) is kept as sent; one that would grow past the length
    allowed loses characters before its extension. A photo.jpg holding a JPEG is kept;
    one holding a PNG becomes photo.jpg.png."""
    if name.lower().endswith(EXTENSIONS[kind]):
        return name
    suffix = EXTENSIONS[kind][0]
    room = MAX_FILENAME_LENGTH - len(suffix)
    return name[:room] + suffix


def _sha256(upload: UploadedFile) -> str:
    digest = hashlib.sha256()
    upload.seek(0)
    for block in upload.chunks():
        digest.update(block)
    upload.seek(0)
    return digest.hexdigest()


def _replay(*, organisation: Organisation, key: str, sha256: str | None) -> Acceptance | None:
    run = (
        ImportRun.objects.select_related("document")
        .filter(organisation=organisation, idempotency_key=key)
        .first()
    )
    if run is None:
        return None
    if sha256 is not None and run.request_sha256 and run.request_sha256 != sha256:
        raise ServiceError(
            "This Idempotency-Key was already used for a different file.",
            code="idempotency_key_reused",
        )
    return _replayed(run)


def _duplicate(document: Document) -> Acceptance:
    """The answer to bytes the organisation has as `document`: it, and its latest run."""
    run = ImportRun.objects.filter(document=document).order_by("-created_at", "-id").first()
    return Acceptance(run=run, document=document, duplicate=True)


def _duplicate_found(
    *, organisation: Organisation, sha256: str, allow_duplicate: bool, locked: bool = False
) -> Document | None:
    if allow_duplicate:
        return None
    return document_duplicate_of(organisation_id=organisation.id, sha256=sha256, locked=locked)


def _replayed(run: ImportRun) -> Acceptance:
    """The first answer again, unless its document has been deleted since: then the
    request is refused, not answered with a document that is gone."""
    if run.document is not None and run.document.deleted_at is not None:
        raise Conflict(
            "The document this request made has been deleted since; send the file again "
            "as a new upload (with a new Idempotency-Key) to process it again.",
            code="document_deleted",
        )
    return Acceptance(run=run, document=run.document, replayed=True)


def upload_run(*, pending: PendingUpload) -> ImportRun | None:
    """The run that completing the direct upload `pending` made, or None if no completion
    of it has committed."""
    return (
        ImportRun.objects.select_related("document")
        .filter(document_id=pending.reserved_document_id)
        .order_by("created_at")
        .first()
    )


def upload_acceptance(*, pending: PendingUpload) -> Acceptance | None:
    """What completing the direct upload `pending` accepted (its document and run), or
    None if no completion of it has committed; Conflict if that document was deleted."""
    run = upload_run(pending=pending)
    return None if run is None else _replayed(run)


def _pending_duplicate(*, pending: PendingUpload, document: Document) -> Acceptance:
    """The answer to the direct upload `pending` whose bytes `document` has: a completion
    of this same upload that committed meanwhile made it (its answer, replayed), or
    another upload did (a duplicate)."""
    if document.id == pending.reserved_document_id and (
        found := upload_acceptance(pending=pending)
    ):
        return found
    return _duplicate(document)


def _kind_mismatch(*, pending: PendingUpload, kind: str) -> UnsupportedFileType:
    return UnsupportedFileType(
        f"The file is {DESCRIPTIONS[kind]} but its upload was declared as "
        f"{DESCRIPTIONS[pending.kind]}; "
        "ask for a new upload that declares it as what it is.",
        code="type_mismatch",
    )


def _store(*, organisation: Organisation, key: str, upload: UploadedFile) -> None:
    try:
        storage_put(key=key, content=upload.file)
    except STORAGE_ERRORS as exc:
        logger.warning("could not store an upload of organisation %s: %s", organisation.id, exc)
        raise StorageUnavailable(
            "We could not store the file just now; nothing was kept. Please try again in a minute.",
            retry_after=STORAGE_RETRY_AFTER_SECONDS,
        ) from exc


def file_too_large(size_bytes: int) -> FileTooLarge:
    """413 for a file of `size_bytes`, over PAPERLANE_MAX_UPLOAD_BYTES."""
    limit = settings.PAPERLANE_MAX_UPLOAD_BYTES
    return FileTooLarge(
        f"The file is {size_bytes} bytes; the limit is {limit} bytes.", max_bytes=limit
    )


def _idempotency_key_checked(key: str | None) -> str | None:
    if key is None:
        return None
    key = key.strip()
    if not key or len(key) > IDEMPOTENCY_KEY_MAX:
        raise InvalidUpload(
            f"Idempotency-Key must be 1 to {IDEMPOTENCY_KEY_MAX} characters.",
            code="invalid_idempotency_key",
        )
    return key


class _SameBytes(Exception):
    """Raised in the recording transaction, to end it, when the bytes turn out to be
    those of `document` (recorded meanwhile by an identical upload)."""

    def __init__(self, document: Document) -> None:
        super().__init__(str(document.id))
        self.document = document


@dataclass(frozen=True)
class _Checked:
    """An upload that passed every check before anything is recorded."""

    filename: str
    sha256: str
    inspection: Inspection


def _digest(*, organisation: Organisation, upload: UploadedFile, sha256: str | None) -> str:
    """Admission, then the bytes' digest (unless it was taken already)."""
    # Before the file is read or stored: a refusal is instant and records nothing.
    admission_check(organisation_id=organisation.id)
    return sha256 or _sha256(upload)


def _checked(
    *, organisation: Organisation, filename: str, sha256: str, inspection: Inspection
) -> _Checked:
    """The name the bytes are kept under, and the quota for their pages."""
    filename = filename_for_kind(filename, inspection.kind)
    quota_check(organisation=organisation, pages=inspection.pages)
    return _Checked(filename=filename, sha256=sha256, inspection=inspection)


def _named(upload: UploadedFile, filename: str | None) -> str:
    filename = filename_validate(filename if filename is not None else upload.name)
    if upload.size is not None and upload.size > settings.PAPERLANE_MAX_UPLOAD_BYTES:
        raise file_too_large(upload.size)
    return filename


def _insert(
    *,
    organisation: Organisation,
    checked: _Checked,
    document_id: uuid.UUID,
    key: str,
    size: int,
    source: str,
    user: AbstractBaseUser | None,
    api_token: ApiToken | None,
    idempotency_key: str | None = None,
) -> Acceptance:
    """In the caller's transaction: the document, its reservation, its run (due at its
    first stage, enqueued once the transaction commits) and its first history row, in one
    statement. `_hold` follows, last."""
    document = Document(
        id=document_id,
        organisation=organisation,
        filename=checked.filename,
        kind=checked.inspection.kind,
        size_bytes=size,
        sha256=checked.sha256,
        storage_key=key,
        uploaded_by=user,
    )
    reservation = QuotaReservation(
        organisation=organisation,
        pages=checked.inspection.pages,
        estimated=checked.inspection.estimated,
    )
    run, accepted = run_begin(
        actor=Actor.of(user=user, api_token=api_token),
        reason="accepted",
        organisation=organisation,
        document=document,
        reservation=reservation,
        source=source,
        idempotency_key=idempotency_key,
        request_sha256=checked.sha256,
        created_by=user,
        api_token=api_token,
    )
    rows_insert(reservation, document, run, accepted)
    return Acceptance(run=run, document=document)


def _hold(acceptance: Acceptance) -> Acceptance:
    """The accepted run's pages taken, and the organisation's bound of runs checked
    (OrganisationAtBound), last in the transaction: the organisation's row is locked from
    here to the commit, as briefly as possible, so concurrent uploads of one organisation
    take their pages and count its runs one after another, and the quota and its bound
    of runs hold exactly."""
    run = acceptance.run
    quota_take(reservation=run.reservation)
    if admission_organisation_over(organisation_id=run.organisation_id):
        raise OrganisationAtBound()
    return acceptance


def document_accept(
    *,
    organisation: Organisation,
    upload: UploadedFile,
    source: str,
    filename: str | None = None,
    user: AbstractBaseUser | None = None,
    api_token: ApiToken | None = None,
    idempotency_key: str | None = None,
    allow_duplicate: bool = False,
) -> Acceptance:
    """Accept an uploaded file for processing, or raise a ServiceError saying why not.

    `filename` is the name the client sent, if it differs from `upload.name`. The bytes
    are written once, to the new document's stable key, before the rows that point to
    them are recorded; a refusal after that deletes them. A request repeating an
    `idempotency_key` is answered with what the first one made. Bytes of a live document
    of the organisation are answered with it (`duplicate`), unless `allow_duplicate`.
    Forbidden for a viewer (person or token), before the file is inspected or stored.
    """
    ability_require(
        organisation_id=organisation.id, ability=Ability.UPLOAD, user=user, api_token=api_token
    )
    idempotency_key = _idempotency_key_checked(idempotency_key)
    filename = _named(upload, filename)
    sha256 = None
    if idempotency_key:
        sha256 = _sha256(upload)
        if found := _replay(organisation=organisation, key=idempotency_key, sha256=sha256):
            return found
    sha256 = _digest(organisation=organisation, upload=upload, sha256=sha256)
    if found := _duplicate_found(
        organisation=organisation, sha256=sha256, allow_duplicate=allow_duplicate
    ):
        return _duplicate(found)
    checked = _checked(
        organisation=organisation,
        filename=filename,
        sha256=sha256,
        inspection=inspect_upload(upload.file),
    )
    document_id = uuid.uuid4()
    key = document_storage_key(
        organisation_id=organisation.id,
        document_id=document_id,
        version=1,
        kind=checked.inspection.kind,
    )
    _store(organisation=organisation, key=key, upload=upload)
    try:
        with transaction.atomic():
            # Under the lock of these bytes: an identical upload that got this far first
            # has committed its document by now.
            if found := _duplicate_found(
                organisation=organisation,
                sha256=sha256,
                allow_duplicate=allow_duplicate,
                locked=True,
            ):
                raise _SameBytes(found)
            acceptance = _insert(
                organisation=organisation,
                checked=checked,
                document_id=document_id,
                key=key,
                size=upload.size,
                source=source,
                user=user,
                api_token=api_token,
                idempotency_key=idempotency_key,
            )
            return _hold(acceptance)
    except _SameBytes as same:
        storage_delete(key=key)
        # A request with the same Idempotency-Key recorded them meanwhile: its answer.
        if idempotency_key and (
            found := _replay(organisation=organisation, key=idempotency_key, sha256=sha256)
        ):
            return found
        return _duplicate(same.document)
    except OrganisationAtBound:
        storage_delete(key=key)
        raise admission_organisation_refusal(organisation_id=organisation.id) from None
    except IntegrityError:
        storage_delete(key=key)
        # Two requests with one Idempotency-Key raced; the other one won.
        if idempotency_key and (
            found := _replay(organisation=organisation, key=idempotency_key, sha256=sha256)
        ):
            return found
        raise
    except BaseException:
        storage_delete(key=key)
        raise


def pending_upload_accept(
    *,
    organisation: Organisation,
    pending: PendingUpload,
    upload: UploadedFile,
    source: str,
    user: AbstractBaseUser | None = None,
    api_token: ApiToken | None = None,
    allow_duplicate: bool = False,
) -> Acceptance:
    """Accept the bytes of the direct upload `pending`, read back from the key they were
    PUT to (the stable key of the document they become), or raise a ServiceError. They
    are checked exactly as any upload's, and must be of the kind declared (which named the
    key); the document then points at them where they are. Nothing is written, and a
    refusal leaves them where they are for the caller to deal with. Completing one direct
    upload twice at once makes one document: the second is answered with it. Bytes of a
    live document of the organisation are answered with it (`duplicate`) unless
    `allow_duplicate`, and the upload stays open, its bytes where they are: completing it
    with `allow_duplicate` keeps them as a second copy."""
    # As declared: UploadedFile would clean the name it is given.
    filename = _named(upload, pending.filename)
    sha256 = _digest(organisation=organisation, upload=upload, sha256=None)
    if found := _duplicate_found(
        organisation=organisation, sha256=sha256, allow_duplicate=allow_duplicate
    ):
        return _pending_duplicate(pending=pending, document=found)
    inspection = inspect_upload(upload.file)
    # Bytes of another kind than declared are refused as such (and deleted by the
    # caller) before the quota is asked about them.
    if inspection.kind != pending.kind:
        raise _kind_mismatch(pending=pending, kind=inspection.kind)
    checked = _checked(
        organisation=organisation, filename=filename, sha256=sha256, inspection=inspection
    )
    try:
        with transaction.atomic():
            if found := _duplicate_found(
                organisation=organisation,
                sha256=sha256,
                allow_duplicate=allow_duplicate,
                locked=True,
            ):
                raise _SameBytes(found)
            acceptance = _insert(
                organisation=organisation,
                checked=checked,
                document_id=pending.reserved_document_id,
                key=pending.storage_key,
                size=upload.size,
                source=source,
                user=user,
                api_token=api_token,
            )
            # Before the organisation's row: a completion racing this one (and refusing the
            # bytes) waits on the upload's row, and finds it completed.
            pending_upload_mark_completed(upload=pending, document=acceptance.document)
            return _hold(acceptance)
    except _SameBytes as same:
        return _pending_duplicate(pending=pending, document=same.document)
    except OrganisationAtBound:
        raise admission_organisation_refusal(organisation_id=organisation.id) from None
    except IntegrityError:
        # Two completions of one direct upload raced (one document id); the other one won.
        if found := upload_acceptance(pending=pending):
            return found
        raise
