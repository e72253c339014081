"""Direct uploads: a client PUTs a large file straight to S3 with a presigned URL, then
completes the upload, and the file is accepted as any upload is.

- `pending_upload_create` refuses at once what the accept path would refuse without
  reading a byte (the name, the size, the type, a full pipeline, an empty quota) and
  what the organisation's open uploads leave no room for (their number, their bytes),
  then hands out a URL that takes one PUT of exactly the declared size and type, for
  PAPERLANE_UPLOAD_URL_SECONDS, to the stable key of the document the upload becomes
  (under its organisation's prefix).
- `pending_upload_complete` looks at the object (HEAD), reads it back within the size
  limit and READ_SECONDS, and gives it to `pending_upload_accept`: the same
  checks, quota reservation, document, run and enqueue as a multipart upload. The
  document keeps the object where it is. Completing again answers the same.

Bytes refused at completion (another size than declared, another type, damaged,
encrypted) are deleted at once, unless another completion of the same upload accepted
them meanwhile (pending_upload_bytes_discard: under the upload's row lock, only while
it is not completed); the upload stays open until it expires, so a corrected file may
be PUT to the same URL while it is valid. A refusal that depends on the moment (busy,
quota, storage) keeps them: completing again later may succeed. What is never completed
is removed with its object by the sweeper (pending_uploads_remove_expired).
"""

import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import BinaryIO

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.uploadedfile import UploadedFile
from django.utils import timezone

from core.errors import (
    Conflict,
    FileTooLarge,
    InvalidUpload,
    NotFound,
    ServiceError,
    StorageUnavailable,
    UnreadableDocument,
    UnsupportedFileType,
)
from documents.models import ApiToken, Organisation, PendingUpload
from documents.roles import Ability, ability_require
from documents.s3 import presigned_put, presigned_supported, stored_read, stored_size
from documents.selectors import pending_upload_get
from documents.services.pending_uploads import (
    pending_upload_bytes_discard,
    pending_upload_expired,
    pending_upload_kind,
    pending_upload_open,
)
from documents.services.quota import quota_check
from documents.storage import STORAGE_ERRORS, document_storage_key
from pipeline.models import RunSource
from pipeline.services.accept import (
    STORAGE_RETRY_AFTER_SECONDS,
    Acceptance,
    file_too_large,
    filename_validate,
    pending_upload_accept,
    upload_acceptance,
)
from pipeline.services.admission import admission_check

logger = logging.getLogger(__name__)

# How long after its URL expires an upload may still be completed (a PUT started just
# before the URL expires can take minutes); past that the sweeper removes it and its object.
COMPLETE_SECONDS = 3600
# Completing reads the object back from S3 within this long, or answers 503 to send again.
READ_SECONDS = 30.0

# Refusals of the bytes themselves: the same bytes would be refused again.
BYTES_REFUSED = (InvalidUpload, FileTooLarge, UnsupportedFileType, UnreadableDocument)


@dataclass(frozen=True)
class UploadGrant:
    pending: PendingUpload
    url: str
    # The headers the PUT must send, exactly: they are signed into the URL.
    headers: dict[str, str]


def _require_presigned() -> None:
    if not presigned_supported():
        raise Conflict(
            "This server keeps documents on its own disk, not in S3, so it cannot take "
            "direct uploads; send the file to POST /api/v1/documents instead.",
            code="presigned_unsupported",
        )


def pending_upload_create(
    *,
    organisation: Organisation,
    filename: str,
    size_bytes: int,
    content_type: str | None = None,
    api_token: ApiToken | None = None,
    user: AbstractBaseUser | None = None,
) -> UploadGrant:
    """Open a direct upload and say where and how to PUT its file, or raise a
    ServiceError without recording anything: 409 `presigned_unsupported` when documents
    are not stored in S3, 400 for the name or size, 413 over the upload limit, 415 for
    a type other than PDF, DOCX, PNG, JPEG or TIFF, 429 (Retry-After) when admission
    control is full or the organisation has its bound of uploads open (in number or in
    bytes), 402 when no page of quota is left, 403 for a viewer's token."""
    ability_require(
        organisation_id=organisation.id, ability=Ability.UPLOAD, user=user, api_token=api_token
    )
    _require_presigned()
    filename = filename_validate(filename)
    if size_bytes == 0:
        raise InvalidUpload("The file is empty.", code="empty_file")
    if size_bytes < 0:
        raise InvalidUpload("size_bytes must be the file's size in bytes.", code="invalid_size")
    if size_bytes > settings.PAPERLANE_MAX_UPLOAD_BYTES:
        raise file_too_large(size_bytes)
    kind, content_type = pending_upload_kind(filename=filename, content_type=content_type)
    admission_check(organisation_id=organisation.id)
    # Its page count is known only from its bytes, but every document has a page.
    quota_check(organisation=organisation, pages=1)

    expires_at = timezone.now() + timedelta(seconds=settings.PAPERLANE_UPLOAD_URL_SECONDS)
    document_id = uuid.uuid4()
    pending = PendingUpload(
        organisation=organisation,
        api_token=api_token,
        created_by=user,
        reserved_document_id=document_id,
        storage_key=document_storage_key(
            organisation_id=organisation.id, document_id=document_id, version=1, kind=kind
        ),
        filename=filename,
        kind=kind,
        content_type=content_type,
        size_bytes=size_bytes,
        expires_at=expires_at,
        complete_by=expires_at + timedelta(seconds=COMPLETE_SECONDS),
    )
    try:
        put = presigned_put(
            key=pending.storage_key,
            size_bytes=size_bytes,
            content_type=content_type,
            seconds=settings.PAPERLANE_UPLOAD_URL_SECONDS,
        )
    except STORAGE_ERRORS as exc:  # no credentials to sign with, for one
        logger.warning("could not sign an upload URL: %s", exc)
        raise StorageUnavailable(
            "We cannot hand out upload URLs just now; please try again in a minute.",
            retry_after=STORAGE_RETRY_AFTER_SECONDS,
        ) from exc
    # Within the organisation's bounds of open uploads, in number and in bytes (signing
    # is local: a refusal here has given nothing out).
    pending_upload_open(upload=pending)
    return UploadGrant(pending=pending, url=put.url, headers=put.headers)


def pending_upload_complete(
    *,
    organisation: Organisation,
    upload_id: uuid.UUID,
    api_token: ApiToken | None = None,
    user: AbstractBaseUser | None = None,
    source: str = RunSource.API,
    allow_duplicate: bool = False,
) -> Acceptance:
    """Accept the file PUT for a direct upload as any upload is accepted,
    or raise a ServiceError: 404 for an upload that is not the organisation's, 409
    `presigned_unsupported` or `upload_missing` (nothing was PUT, or refused bytes were
    deleted), 410 `upload_expired` once its time to be completed is over, 422
    `size_mismatch` when the object is not the size declared, and otherwise what a
    multipart upload of the same bytes is answered. An upload already completed is
    answered with the same document and run (`replayed`), and nothing new is made.
    Forbidden for a viewer (token or person), before the file is read. `source`: where
    the run says it came from (a member page's direct upload is `web`)."""
    pending = pending_upload_get(organisation=organisation, upload_id=upload_id)
    ability_require(
        organisation_id=organisation.id, ability=Ability.UPLOAD, user=user, api_token=api_token
    )
    if pending.is_completed:
        return _accepted(pending)
    _require_presigned()
    if timezone.now() >= pending.complete_by:
        raise pending_upload_expired(upload=pending)
    try:
        with _read_back(pending) as content:
            upload = UploadedFile(
                content,
                name=pending.filename,
                content_type=pending.content_type,
                size=pending.size_bytes,
            )
            return pending_upload_accept(
                organisation=organisation,
                pending=pending,
                upload=upload,
                source=source,
                api_token=api_token,
                user=user,
                allow_duplicate=allow_duplicate,
            )
    except BYTES_REFUSED:
        # Unless a completion of the same upload accepted them meanwhile (a refusal can
        # depend on the moment: the inspection's clock, a limit lowered).
        pending_upload_bytes_discard(upload=pending)
        raise
    except ServiceError:
        # A completion of the same upload that committed meanwhile answers for both.
        if found := upload_acceptance(pending=pending):
            return found
        raise


def _accepted(pending: PendingUpload) -> Acceptance:
    found = upload_acceptance(pending=pending)
    if found is None:  # completed, yet no run: its rows were removed by hand
        raise NotFound("Upload not found.")
    return found


def _read_back(pending: PendingUpload) -> BinaryIO:
    """The upload's bytes, read within its declared size and READ_SECONDS."""
    if pending.size_bytes > settings.PAPERLANE_MAX_UPLOAD_BYTES:  # the limit was lowered
        raise file_too_large(pending.size_bytes)
    try:
        size = stored_size(key=pending.storage_key)
        if size is None:
            raise FileNotFoundError(pending.storage_key)
        if size != pending.size_bytes:
            raise _size_mismatch(pending, size)
        content = stored_read(
            key=pending.storage_key,
            max_bytes=pending.size_bytes,
            seconds=READ_SECONDS,
        )
    except FileNotFoundError:
        raise Conflict(
            "Nothing has been uploaded for this upload yet: PUT the file to its URL, "
            "with the headers given, then complete it.",
            code="upload_missing",
        ) from None
    except STORAGE_ERRORS as exc:  # S3 down, past its timeouts, or too slow to read
        logger.warning("could not read back upload %s: %s", pending.id, exc)
        raise StorageUnavailable(
            "We could not read the uploaded file from storage just now; it is kept. "
            "Please complete the upload again in a minute.",
            retry_after=STORAGE_RETRY_AFTER_SECONDS,
        ) from exc
    read = content.seek(0, 2)
    content.seek(0)
    if read != pending.size_bytes:  # replaced between the HEAD and the read
        content.close()
        raise _size_mismatch(pending, read)
    return content


def _size_mismatch(pending: PendingUpload, size: int) -> UnreadableDocument:
    return UnreadableDocument(
        f"The uploaded file is {size} bytes but {pending.size_bytes} were declared; "
        "PUT the whole file, as declared, and complete the upload again.",
        code="size_mismatch",
    )
