"""Direct uploads waiting to be completed: what a declared file is taken for, the bound of
open uploads per organisation, marking one completed, deleting refused bytes, and removing
those whose time ran out. Asking for the URL and completing through the accept path are
the pipeline's side (pipeline/services/direct_uploads.py).

An upload's bytes belong to it until a completion marks it completed, and from then to
its document. Whatever deletes them (a refused completion, the sweeper) does so under
the upload's row lock, and only while the row says it is not completed; a completion
that accepts them holds that lock from marking the row until it commits, and checks
that the bytes are still there once it holds it. So bytes a document owns are never
deleted, and no document is made of bytes that were.
"""

import logging
import uuid

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from core.errors import (
    Conflict,
    FileTooLarge,
    Gone,
    StorageUnavailable,
    TooManyOpenUploads,
    UnsupportedFileType,
)
from documents.models import Document, Organisation, PendingUpload
from documents.s3 import stored_size
from documents.storage import STORAGE_ERRORS, STORAGE_RETRY_AFTER_SECONDS, storage_delete
from formats.base import MEDIA_TYPES, SUPPORTED, kind_by_name

logger = logging.getLogger(__name__)

# Direct uploads one organisation may have open (asked for, neither completed nor
# expired), and the bytes their files may declare together; more are refused with 429.
OPEN_PER_ORGANISATION = 1000
OPEN_BYTES_PER_ORGANISATION = 5 * 1024**3

_KIND_BY_TYPE = {content_type: kind for kind, content_type in MEDIA_TYPES.items()}
# Types that say nothing about the file: its name's extension decides.
_GENERIC_TYPES = {"", "application/octet-stream", "binary/octet-stream"}


def pending_upload_kind(*, filename: str, content_type: str | None) -> tuple[str, str]:
    """The kind a declared file is taken for and the Content-Type its PUT must send, or
    UnsupportedFileType (415). A type of ours (PDF, DOCX, PNG, JPEG, TIFF) decides, and
    the name's extension may not say otherwise; a generic or missing type leaves it to
    the extension. The bytes are checked at completion, as an upload's are: the
    declaration only names the key."""
    media_type = (content_type or "").split(";", 1)[0].strip().lower()
    by_extension = kind_by_name(filename)
    if media_type in _KIND_BY_TYPE:
        kind = _KIND_BY_TYPE[media_type]
        if by_extension not in (None, kind):
            raise UnsupportedFileType(
                f"The name {filename!r} says {by_extension.upper()} but the content type "
                f"{media_type} says {kind.upper()}; declare the file as what it is."
            )
    elif media_type not in _GENERIC_TYPES:
        raise UnsupportedFileType(f"{SUPPORTED}; this file is declared as {media_type}.")
    elif by_extension is None:
        raise UnsupportedFileType(
            f"{SUPPORTED}: name the file by its kind (.pdf, .docx, .png, .jpg, .tif), or "
            "declare its content_type."
        )
    else:
        kind = by_extension
    return kind, MEDIA_TYPES[kind]


def _open_uploads(organisation_id: int):
    return PendingUpload.objects.filter(
        organisation_id=organisation_id,
        complete_by__gt=timezone.now(),
        completed_at__isnull=True,
    )


def _count_check(*, organisation_id: int) -> None:
    """OPEN_PER_ORGANISATION: reads at most that many rows' ends, on an index."""
    bound = OPEN_PER_ORGANISATION
    open_ends = _open_uploads(organisation_id).order_by("complete_by")
    open_ends = open_ends.values_list("complete_by", flat=True)
    if not open_ends[bound - 1 : bound].exists():
        return
    # A slot is sure to be free when the first of them expires (sooner if one is completed).
    raise TooManyOpenUploads(
        f"Your organisation has {bound} uploads open; complete them, or let them expire, "
        "before asking for more.",
        retry_after=_seconds_until(open_ends.first()),
    )


def _bytes_check(*, organisation_id: int, size_bytes: int) -> None:
    """OPEN_BYTES_PER_ORGANISATION: one sum, on the same index; the rows only to say when
    enough of them will have expired."""
    bound = OPEN_BYTES_PER_ORGANISATION
    if size_bytes > bound:
        raise FileTooLarge(
            f"The file is {size_bytes} bytes; the files of your organisation's open uploads "
            f"may hold at most {bound} bytes together.",
            code="open_upload_bytes_exceeded",
            max_bytes=bound,
        )
    uploads = _open_uploads(organisation_id)
    held = uploads.aggregate(held=Sum("size_bytes"))["held"] or 0
    if held + size_bytes <= bound:
        return
    # Room for this one once enough of them have expired (sooner if some are completed).
    freed, until = 0, None
    for ends, size in uploads.order_by("complete_by").values_list("complete_by", "size_bytes"):
        freed, until = freed + size, ends
        if held - freed + size_bytes <= bound:
            break
    raise TooManyOpenUploads(
        f"Your organisation's open uploads hold {held} bytes, and may hold {bound} bytes "
        f"together: a file of {size_bytes} bytes does not fit. Complete them, or let them "
        "expire, before asking for this one.",
        retry_after=_seconds_until(until),
        code="too_many_open_upload_bytes",
    )


def _seconds_until(moment) -> int:
    return max(int(((moment or timezone.now()) - timezone.now()).total_seconds()) + 1, 1)


@transaction.atomic
def pending_upload_open(*, upload: PendingUpload) -> PendingUpload:
    """Record a new direct upload within its organisation's bounds of open uploads (asked
    for, neither completed nor expired): OPEN_PER_ORGANISATION of them, holding
    OPEN_BYTES_PER_ORGANISATION bytes together (each holds a key, maybe an object,
    unbilled, until it ends). Over either, 429 with Retry-After (413 for a file larger
    than the bytes bound itself), and nothing is recorded. Checked and saved under the
    organisation's row lock: concurrent requests cannot pass a bound together."""
    # NO KEY: rows referring to the organisation need not wait for it.
    locked = Organisation.objects.select_for_update(no_key=True).filter(id=upload.organisation_id)
    list(locked.values_list("id", flat=True))
    _count_check(organisation_id=upload.organisation_id)
    _bytes_check(organisation_id=upload.organisation_id, size_bytes=upload.size_bytes)
    upload.save(force_insert=True)
    return upload


def pending_upload_expired(*, upload: PendingUpload) -> Gone:
    return Gone(
        f"This upload could be completed until {upload.complete_by:%Y-%m-%d %H:%M:%S} UTC "
        "and was not; ask for a new one.",
        code="upload_expired",
    )


def pending_upload_missing(*, upload: PendingUpload) -> Conflict:
    return Conflict(
        "The uploaded file is no longer there (another completion of this upload refused "
        "it, and it was deleted): PUT the file to its URL again, then complete the upload.",
        code="upload_missing",
    )


@transaction.atomic(savepoint=False)
def pending_upload_mark_completed(*, upload: PendingUpload, document: Document) -> None:
    """Record that the upload became `document`. Call inside the transaction that accepts
    the document: the upload's row stays locked until it ends, so nothing deletes the
    bytes meanwhile. Gone (410) if the sweeper removed the upload meanwhile (its time had
    run out); Conflict (409 upload_missing) if a refused completion deleted its bytes
    before this one held the row; the transaction must then end. A second completion
    that accepts never gets here: its document, under the same id, conflicts first."""
    now = timezone.now()
    marked = PendingUpload.objects.filter(id=upload.id, completed_at__isnull=True).update(
        document=document, completed_at=now
    )
    if marked != 1:
        raise pending_upload_expired(upload=upload)
    try:
        # The bytes were read before this lock was taken; a refusal may have deleted them.
        size = stored_size(key=upload.storage_key)
    except STORAGE_ERRORS as exc:
        logger.warning("could not check the bytes of upload %s: %s", upload.id, exc)
        raise StorageUnavailable(
            "We could not check the uploaded file in storage just now; it is kept. "
            "Please complete the upload again in a minute.",
            retry_after=STORAGE_RETRY_AFTER_SECONDS,
        ) from exc
    if size != upload.size_bytes:
        raise pending_upload_missing(upload=upload)
    upload.document, upload.completed_at = document, now


def pending_upload_bytes_discard(*, upload: PendingUpload) -> bool:
    """Delete the bytes PUT for `upload` that a completion refused, unless a document owns
    them: under the upload's row lock, only while the row says it is not completed. A
    completion accepting them meanwhile holds that lock until it commits: this waits for
    it, then leaves them. Returns whether they were deleted; bytes the storage would not
    delete are left for the sweeper, once the upload expires."""
    try:
        with transaction.atomic():
            still_open = (
                PendingUpload.objects.select_for_update()
                .filter(id=upload.id, completed_at__isnull=True)
                .first()
            )
            if still_open is None:  # accepted by another completion, or removed
                return False
            storage_delete(key=still_open.storage_key)
            return True
    except STORAGE_ERRORS as exc:
        logger.warning("could not delete the refused upload %s: %s", upload.id, exc)
        return False


def pending_uploads_remove_expired(*, limit: int) -> int:
    """Remove the uploads whose time to be completed is over, longest over first, at most
    `limit`; returns how many went. One never completed goes with its object; a
    completed one's row goes alone (its object is its document's). An object the
    storage will not delete keeps its row, for the next pass to try again."""
    now = timezone.now()
    ids = (
        PendingUpload.objects.filter(complete_by__lte=now)
        .order_by("complete_by", "id")
        .values_list("id", flat=True)[:limit]
    )
    return sum(1 for upload_id in list(ids) if _remove_expired(upload_id=upload_id))


def _remove_expired(*, upload_id: uuid.UUID) -> bool:
    try:
        with transaction.atomic():
            upload = (
                PendingUpload.objects.select_for_update(skip_locked=True)
                .filter(id=upload_id, complete_by__lte=timezone.now())
                .first()
            )
            if upload is None:  # another sweeper has it, or a completion is committing it
                return False
            if upload.completed_at is None:
                # Under the row's lock: a completion still going waits for it, then finds
                # the upload gone and ends without a document pointing at nothing.
                storage_delete(key=upload.storage_key)
            upload.delete()
            return True
    except STORAGE_ERRORS as exc:
        logger.warning("could not delete expired upload %s (next pass tries): %s", upload_id, exc)
        return False
