"""PDF: recognise, count pages (accept) and extract text per page (extract stage)."""

import io
import logging
from typing import BinaryIO

from pypdf import PdfReader
from rq.timeouts import BaseTimeoutException

from core.errors import UnreadableDocument
from documents.formats.base import Extracted, Inspection, OnPage, check_page_count
from documents.models import DocumentKind

logger = logging.getLogger(__name__)

KIND = DocumentKind.PDF
# Some producers put junk before the header; readers accept it within 1 KiB.
HEADER_WINDOW = 1024
_TRAILER_WINDOW = 2048

ENCRYPTED = UnreadableDocument(
    "The PDF is protected by a password. Remove the password and upload it again.",
    code="encrypted_pdf",
)


def _damaged(detail: str = "could not be read") -> UnreadableDocument:
    return UnreadableDocument(
        f"The PDF {detail}; the file appears to be damaged.", code="damaged_pdf"
    )


def matches(head: bytes) -> bool:
    return b"%PDF-" in head[:HEADER_WINDOW]


def _open(stream: BinaryIO, *, strict: bool) -> PdfReader:
    reader = PdfReader(stream, strict=strict)
    if reader.is_encrypted and not reader.decrypt(""):
        raise ENCRYPTED
    return reader


def inspect(stream: BinaryIO) -> Inspection:
    """The page count the page tree states, without walking the pages."""
    stream.seek(0, 2)
    size = stream.tell()
    stream.seek(max(size - _TRAILER_WINDOW, 0))
    tail = stream.read()
    stream.seek(0)
    if b"%%EOF" not in tail:
        raise UnreadableDocument(
            "The PDF is incomplete (it has no end-of-file marker); it may have been cut off "
            "during transfer. Please upload the whole file again.",
            code="truncated_pdf",
        )
    try:
        # Strict parsing reads only the xref table; the tolerant mode also visits
        # every object, so it is kept for files the strict parser refuses.
        try:
            reader = _open(stream, strict=True)
        except UnreadableDocument:
            raise
        except Exception:  # any complaint: let the tolerant parser decide
            stream.seek(0)
            reader = _open(stream, strict=False)
        pages = reader.root_object["/Pages"]["/Count"]
    except UnreadableDocument:
        raise
    except Exception as exc:  # pypdf raises many types for damaged input
        logger.info("unreadable PDF at accept: %s", exc)
        raise _damaged() from exc
    finally:
        stream.seek(0)
    return Inspection(kind=KIND, pages=check_page_count(pages, what="PDF"), estimated=False)


def extract(data: bytes, *, on_page: OnPage | None = None) -> Extracted:
    """Text of every page and the number of pages there really are."""
    try:
        reader = _open(io.BytesIO(data), strict=False)
        pages = reader.pages
        total = len(pages)
    except (UnreadableDocument, BaseTimeoutException):
        raise
    except Exception as exc:
        raise _damaged() from exc
    if total < 1:
        raise _damaged("'s pages could not be found")
    check_page_count(total)
    texts = []
    for number, page in enumerate(pages, start=1):
        try:
            texts.append(page.extract_text() or "")
        except BaseTimeoutException:
            raise
        except Exception as exc:
            raise UnreadableDocument(
                f"Page {number} of the PDF could not be read; the file appears to be damaged.",
                code="damaged_pdf",
            ) from exc
        if on_page is not None:
            on_page(number, total)
    return Extracted(text="\n\n".join(texts), page_count=total)
