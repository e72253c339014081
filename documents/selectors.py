"""Reads scoped to one organisation. Another organisation's ids are simply not found."""

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet, Sum
from django.db.models.functions import Substr

from core.errors import Conflict, NotFound, StorageUnavailable
from core.http import attachment
from documents.models import (
    ApiToken,
    Chunk,
    Document,
    DocumentText,
    Membership,
    Organisation,
    PageReading,
    PendingUpload,
    UsageEntry,
)
from documents.s3 import presigned_get, presigned_supported, stored_size
from documents.storage import (
    STORAGE_ERRORS,
    STORAGE_RETRY_AFTER_SECONDS,
    StoredStream,
    storage_stream,
)
from formats.base import MEDIA_TYPES, PAGE_BREAK

logger = logging.getLogger(__name__)


def _documents(organisation: Organisation) -> QuerySet[Document]:
    # A deleted document is kept for the books only: people and integrations never see it.
    return Document.objects.filter(organisation=organisation, deleted_at__isnull=True)


def document_list(*, organisation: Organisation) -> QuerySet[Document]:
    return _documents(organisation).order_by("-created_at", "id")


def document_get(*, organisation: Organisation, document_id: uuid.UUID) -> Document:
    """The organisation's document; NotFound for another's, an unknown or a deleted one."""
    try:
        return _documents(organisation).get(id=document_id)
    except Document.DoesNotExist:
        raise NotFound("Document not found.") from None


def document_was_deleted(*, organisation: Organisation, document_id: uuid.UUID) -> bool:
    """Whether the organisation had this document and deleted it (another's: False)."""
    return Document.objects.filter(
        organisation=organisation, id=document_id, deleted_at__isnull=False
    ).exists()


def document_file(*, document: Document) -> StoredStream | str:
    """The stored bytes of the document's current version, to be streamed and closed; or,
    in S3 with PAPERLANE_DOWNLOAD_URL_SECONDS set, a short-lived URL that serves them
    as an attachment under the document's name, once a HEAD has found them there.

    Conflict while a connector's document has no version stored yet; NotFound when the
    file is missing from storage; StorageUnavailable (503, Retry-After) when the store
    does not answer or fails.
    """
    if not document.sha256:  # set by the store that made its first version
        raise Conflict(
            "The document's file is not stored yet; it is once its import has fetched it.",
            code="file_not_stored",
        )
    seconds = settings.PAPERLANE_DOWNLOAD_URL_SECONDS
    try:
        if seconds and presigned_supported():
            if stored_size(key=document.storage_key) is None:
                raise FileNotFoundError(document.storage_key)
            return presigned_get(
                key=document.storage_key,
                content_type=MEDIA_TYPES[document.kind],
                disposition=attachment(document.filename),
                seconds=seconds,
            )
        return storage_stream(key=document.storage_key)
    except FileNotFoundError:
        raise NotFound(
            "The document's file is missing from storage.", code="file_missing"
        ) from None
    except STORAGE_ERRORS as exc:
        logger.warning("could not read the file of document %s: %s", document.id, exc)
        raise StorageUnavailable(
            "We could not read the file just now. Please try again in a minute.",
            retry_after=STORAGE_RETRY_AFTER_SECONDS,
        ) from exc


def pending_upload_get(*, organisation: Organisation, upload_id: uuid.UUID) -> PendingUpload:
    try:
        return PendingUpload.objects.get(organisation=organisation, id=upload_id)
    except PendingUpload.DoesNotExist:
        raise NotFound("Upload not found.") from None


def organisations_for_user(*, user: AbstractBaseUser) -> QuerySet[Organisation]:
    return Organisation.objects.filter(memberships__user=user).order_by("slug")


def memberships_for_user(*, user: AbstractBaseUser) -> QuerySet[Membership]:
    """The user's memberships with their organisations, by the organisations' slugs."""
    return (
        Membership.objects.filter(user=user)
        .select_related("organisation")
        .order_by("organisation__slug")
    )


def membership_list(*, organisation: Organisation) -> QuerySet[Membership]:
    """The organisation's members with their accounts, by username."""
    return (
        Membership.objects.filter(organisation=organisation)
        .select_related("user")
        .order_by("user__username", "id")
    )


def usage_entry_list(*, organisation: Organisation) -> QuerySet[UsageEntry]:
    """The organisation's page ledger, newest charge first."""
    return (
        UsageEntry.objects.filter(organisation=organisation)
        .select_related("document")
        .order_by("-created_at", "-id")
    )


def document_pages_charged(*, document: Document) -> int:
    """The pages the ledger charged for the document, all its versions together."""
    return UsageEntry.objects.filter(document=document).aggregate(pages=Sum("pages"))["pages"] or 0


def api_token_list(*, organisation: Organisation, active: bool | None = None) -> QuerySet[ApiToken]:
    """The organisation's API tokens, newest first: all of them, or only the active (True)
    or the revoked (False) ones."""
    tokens = ApiToken.objects.filter(organisation=organisation)
    if active is not None:
        tokens = tokens.filter(revoked_at__isnull=active)
    return tokens.order_by("-created_at", "-id")


def api_token_get(*, organisation: Organisation, token_id: int) -> ApiToken:
    """One of the organisation's API tokens, revoked or not."""
    try:
        return ApiToken.objects.get(organisation=organisation, id=token_id)
    except ApiToken.DoesNotExist:
        raise NotFound("API token not found.") from None


# A format without pages (Word) is shown in parts of this many characters.
TEXT_PART_CHARS = 10_000


@dataclass(frozen=True)
class TextPage:
    number: int
    text: str
    # Characters of the page past what `text` holds.
    cut: int = 0
    # Why OCR could not read the page, when it could not ("" otherwise).
    unread: str = ""


@dataclass(frozen=True)
class TextWindow:
    """Some consecutive pages of a document's extracted text."""

    pages: list[TextPage]
    # Pages in all (of a format without pages: parts of TEXT_PART_CHARS characters).
    total: int
    # False: the format has no pages, and the numbers are parts.
    paged: bool


def document_text_window(
    *, document: Document, first: int, count: int, page_chars: int
) -> TextWindow | None:
    """Pages `first` to `first + count - 1` (from 1) of the text of the document's current
    version, each at most `page_chars` characters; None before its text is extracted.
    A `first` past the end opens the last window of `count` pages counted from page 1
    (pages 11 to 12 of 12, for 10 a window). Only those characters are read from the
    database, however long the text is."""
    texts = DocumentText.objects.filter(document=document, version=document.version)
    row = texts.values("id", "page_starts").first()
    if row is None:
        return None
    # Its length as the extract stage saved it with the text: asking the database would
    # decompress the whole text.
    length = document.text_chars
    starts = [int(offset) for offset in row["page_starts"] or []]
    paged = bool(starts)
    if not paged:
        starts = list(range(0, max(length, 1), TEXT_PART_CHARS))
    total = len(starts)
    last_window = (total - 1) // max(count, 1) * max(count, 1) + 1
    first = min(max(first, 1), last_window)
    last = min(first + count - 1, total)
    spans = {}
    for number in range(first, last + 1):
        start = starts[number - 1]
        # A page ends where the break before the next begins; parts have no breaks.
        end = starts[number] - (len(PAGE_BREAK) if paged else 0) if number < total else length
        spans[number] = (start, max(end - start, 0))
    slices = {
        f"page_{number}": Substr("text", start + 1, max(min(size, page_chars), 1))
        for number, (start, size) in spans.items()
    }
    read = texts.filter(id=row["id"]).values(**slices).get() if slices else {}
    unread = (
        dict(
            PageReading.objects.filter(
                document=document, version=document.version, page__range=(first, last)
            )
            .exclude(problem="")
            .values_list("page", "problem")
        )
        if paged
        else {}
    )
    pages = [
        TextPage(
            number=number,
            text=read[f"page_{number}"][:size] if size else "",
            cut=max(size - page_chars, 0),
            unread=unread.get(number, ""),
        )
        for number, (_, size) in spans.items()
    ]
    return TextWindow(pages=pages, total=total, paged=paged)


def document_chunks(*, document: Document) -> QuerySet[Chunk]:
    """The chunks search reads for the document (of its searchable version; before one
    settles, of its current version), in order, to be shown: without their vectors."""
    version = document.searchable_version or document.version
    chunks = Chunk.objects.filter(document=document, version=version).defer("embedding")
    return chunks.order_by("index")


@dataclass(frozen=True)
class VersionRead:
    """What the pipeline recorded of one version of a document."""

    number: int
    # Counted when its text was read (None until then); when that was.
    pages: int | None
    read_at: datetime | None
    # The pages the ledger charged for it (None until it settled).
    charged: int | None
    current: bool
    searchable: bool


def document_versions(*, document: Document, limit: int) -> list[VersionRead]:
    """The document's `limit` newest versions, newest first, as its text and the usage
    ledger recorded them (their text itself is not read)."""
    numbers = range(document.version, max(document.version - limit, 0), -1)
    texts = {
        row["version"]: row
        for row in DocumentText.objects.filter(document=document, version__in=numbers).values(
            "version", "page_count", "created_at"
        )
    }
    charged = dict(
        UsageEntry.objects.filter(document=document, document_version__in=numbers).values_list(
            "document_version", "pages"
        )
    )
    return [
        VersionRead(
            number=number,
            pages=texts[number]["page_count"] if number in texts else None,
            read_at=texts[number]["created_at"] if number in texts else None,
            charged=charged.get(number),
            current=number == document.version,
            searchable=number == document.searchable_version,
        )
        for number in numbers
    ]
