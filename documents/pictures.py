"""Pictures of a document's pages (a PDF's, a TIFF's frames, a photograph), for people to
see: drawn on demand in the isolated child (core.isolation, formats.render) the first
time one is asked for, then kept in the document's storage folder beside its file, keyed
by its version, page and size. Why on demand and kept, not drawn for every page by a
stage: bench/pictures.py and docs/benchmarks.md ("Page pictures").

A document's pictures go with it: they live under its storage folder, which deleting it
empties (documents.services.removal).
"""

import io
import logging
from dataclasses import dataclass

from core.errors import NotFound, StorageUnavailable, UnreadableDocument
from core.isolation import ChildFailed, LimitExceeded, Limits, run_isolated
from documents.models import Document, DocumentKind
from documents.storage import (
    STORAGE_ERRORS,
    STORAGE_RETRY_AFTER_SECONDS,
    document_folder,
    storage_open,
    storage_put,
)
from formats.render import page_picture

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PictureSize:
    dpi: float
    # At most this many pixels wide (None: as wide as the page is at `dpi`).
    width: int | None
    # The box the pages show it in, in CSS pixels (width, height): a page of another
    # shape is fitted inside it, so that the layout does not move when it arrives.
    box: tuple[int, int]


# A page as a screen shows it (96 dpi: its size on paper), and the list's small preview
# (200 px wide: sharp on a screen of twice the density at the list's 56 px, and for
# pages that show it larger).
PICTURE_SIZES = {
    "page": PictureSize(dpi=96, width=None, box=(816, 1056)),
    "thumb": PictureSize(dpi=96, width=200, box=(56, 72)),
}
# WebP: the smallest of WebP, JPEG and PNG for the same page, drawn as fast
# (bench/pictures.py).
PICTURE_FORMAT = "webp"
PICTURE_MEDIA_TYPE = "image/webp"
# A page that states a huge size is drawn smaller: never more pixels than this (an A2
# poster at 96 dpi is 2.7 million).
PICTURE_MAX_PIXELS = 3_000_000
# The child drawing one page: its memory (address space), CPU and wall clock. The
# request waits for it; a page past these has no picture (a 404).
PICTURE_MEMORY_MB = 768
PICTURE_CPU_SECONDS = 5
PICTURE_WALL_SECONDS = 8.0
# One child draws this many pictures, one after another, before a new one takes over.
PICTURE_CHILD_PAGES = 50
# How long a browser may keep a picture without asking again: its link names the
# document's version, so a new version's is a new link.
PICTURE_MAX_AGE_SECONDS = 24 * 3600
# Changed when the pictures drawn change (size, format, quality): kept pictures of the
# old drawing are not used, and browsers fetch the new ones.
PICTURE_REVISION = 1


def document_has_pictures(document: Document) -> bool:
    """Whether the document's pages can be shown as pictures: a PDF or a picture whose
    bytes are stored and whose pages are counted. A DOCX has no fixed pages."""
    drawable = document.kind != DocumentKind.DOCX
    return drawable and bool(document.sha256) and bool(document.page_count)


def page_picture_tag(*, document: Document, number: int, size: str) -> str:
    """The ETag of page `number`'s picture at `size`, as it is now: it changes with the
    document's version (its file) and with the drawing. NotFound for a picture the
    document cannot have (see page_picture_get), before any ETag is compared."""
    _check(document, number, size)
    return f'"{document.id}-v{document.version}-p{number}-{size}-r{PICTURE_REVISION}"'


def _check(document: Document, number: int, size: str) -> None:
    if size not in PICTURE_SIZES or not document_has_pictures(document):
        raise NotFound("This document has no pictures of its pages.")
    if not 1 <= number <= document.page_count:
        raise NotFound(f"The document has no page {number}.")


def page_picture_key(*, document: Document, number: int, size: str) -> str:
    folder = document_folder(organisation_id=document.organisation_id, document_id=document.id)
    return (
        f"{folder}/v{document.version}/pages/r{PICTURE_REVISION}/{size}-{number}.{PICTURE_FORMAT}"
    )


def picture_limits() -> Limits:
    return Limits(
        memory_bytes=PICTURE_MEMORY_MB * 1024 * 1024,
        cpu_seconds=PICTURE_CPU_SECONDS,
        wall_seconds=PICTURE_WALL_SECONDS,
    )


def page_picture_get(*, document: Document, number: int, size: str) -> bytes:
    """The picture (PICTURE_FORMAT) of page `number` (from 1) of the document's current
    version at `size` (a key of PICTURE_SIZES): the one kept in storage, or drawn now in
    the isolated child and kept. NotFound for a document without pictures, a page it does
    not have, an unknown size or a page that cannot be drawn within the limits (what
    is kept then is empty: it is not drawn again for this version); StorageUnavailable
    when the store fails."""
    _check(document, number, size)
    key = page_picture_key(document=document, number=number, size=size)
    try:
        with storage_open(key=key) as kept:
            picture = kept.read()
    except FileNotFoundError:
        picture = None
    except STORAGE_ERRORS as exc:
        raise _unavailable(document, exc) from exc
    if picture is None:
        try:
            picture = _draw(document, number, PICTURE_SIZES[size])
        except _Undrawable:
            picture = b""  # kept too: the next ask is not another child's seconds
        _keep(key, picture)
    if not picture:
        raise NotFound("This page could not be drawn.")
    return picture


class _Undrawable(Exception):
    """The page cannot be drawn from this version's file, whenever it is tried."""


def _keep(key: str, picture: bytes) -> None:
    try:
        storage_put(key=key, content=io.BytesIO(picture))
    except RuntimeError:
        pass  # another request kept the same picture first
    except STORAGE_ERRORS as exc:  # shown now, drawn again next time
        logger.warning("could not keep the picture %s: %s", key, exc)


def _draw(document: Document, number: int, size: PictureSize) -> bytes:
    """The page drawn in the isolated child; _Undrawable when its file cannot give it
    (damaged, or past the child's memory or CPU); NotFound, not kept, when the child's
    wall clock ran out or no child could start (a busy machine may do better later)."""
    try:
        with storage_open(key=document.storage_key) as original:
            return run_isolated(
                page_picture,
                document.kind,
                number - 1,
                dpi=size.dpi,
                width=size.width,
                max_pixels=PICTURE_MAX_PIXELS,
                image_format=PICTURE_FORMAT,
                file=original,
                limits=picture_limits(),
                reuse=PICTURE_CHILD_PAGES,
            )
    except FileNotFoundError:
        raise NotFound(
            "The document's file is missing from storage.", code="file_missing"
        ) from None
    except STORAGE_ERRORS as exc:
        raise _unavailable(document, exc) from exc
    except (UnreadableDocument, LimitExceeded, ChildFailed) as exc:
        logger.info("no picture of page %s of document %s: %s", number, document.id, exc)
        if isinstance(exc, LimitExceeded) and exc.limit == "time":
            raise NotFound("This page could not be drawn.") from exc
        if isinstance(exc, ChildFailed) and exc.exitcode is None:
            raise NotFound("This page could not be drawn.") from exc
        raise _Undrawable from exc


def _unavailable(document: Document, exc: Exception) -> StorageUnavailable:
    logger.warning("could not read the pictures of document %s: %s", document.id, exc)
    return StorageUnavailable(
        "We could not read the file just now. Please try again in a minute.",
        retry_after=STORAGE_RETRY_AFTER_SECONDS,
    )
