"""PDF: recognise and count pages at accept; text and the real page count at extract.

At accept only the strict parser runs: it reads the cross-reference table and
the page tree's root, nothing else. A file it refuses (a damaged
cross-reference table, say) is not repaired in the request: its pages are
estimated from the page objects in its bytes, and the extract stage repairs
and counts it. pypdf's strict mode still repairs some damage itself (it
rebuilds a broken cross-reference table by inflating every object stream in
the file, and searches every object for a catalog the trailer does not point
to): at accept both are turned off, and every stream it inflates is capped,
so the request's work stays bounded whatever the file. The page tree's /Count
is what the file states; extraction counts the pages there really are, and
that is what is charged.
"""

import io
import logging
from typing import BinaryIO

from pypdf import PdfReader, apply_configuration
from pypdf.errors import PdfReadError
from rq.timeouts import BaseTimeoutException

from core.errors import UnreadableDocument, caused_by
from documents.formats.base import (
    PDF,
    AcceptLimits,
    Deadline,
    Extracted,
    ExtractLimits,
    Inspection,
    OnPage,
    check_page_count,
    clean_extracted,
    too_much_text,
)

logger = logging.getLogger(__name__)

KIND = PDF
# Some producers put junk before the header; readers accept it within 1 KiB.
HEADER_WINDOW = 1024
_TRAILER_WINDOW = 2048
_SCAN_BLOCK = 1024 * 1024
_PADDING = b"\x00\t\n\f\r "
# pypdf reads about 700,000 entries of a cross-reference table a second.
_MAX_XREF_ENTRIES = 500_000
# At accept pypdf inflates the cross-reference stream and the object streams holding
# the catalog and the page tree's root, nothing else: far below these caps.
_ACCEPT_STREAM_BYTES = 16 * 1024 * 1024
_ACCEPT_LIMITS = {
    name: _ACCEPT_STREAM_BYTES
    for name in (
        "maximum_declared_stream_length",
        "zlib_maximum_output_length",
        "lzw_maximum_output_length",
        "run_length_maximum_output_length",
        "brotli_maximum_output_length",
        "array_based_stream_maximum_output_length",
        "stream_decoding_work_maximum_length",
    )
}


def _encrypted() -> UnreadableDocument:
    return UnreadableDocument(
        "The PDF is protected by a password. Remove the password and upload it again.",
        code="encrypted_pdf",
    )


def _damaged(detail: str = "could not be read") -> UnreadableDocument:
    return UnreadableDocument(
        f"The PDF {detail}; the file appears to be damaged.", code="damaged_pdf"
    )


def matches(head: bytes) -> bool:
    return b"%PDF-" in head[:HEADER_WINDOW]


class _UnrepairedReader(PdfReader):
    """pypdf's strict reader without the repair strict mode still makes: a file whose
    cross-reference table needs rebuilding is refused, to be estimated instead."""

    def _rebuild_xref_table(self, stream) -> None:
        raise PdfReadError("the cross-reference table needs repair")


def _decrypted(reader: PdfReader) -> PdfReader:
    if reader.is_encrypted and not reader.decrypt(""):
        raise _encrypted()
    return reader


def _stated_pages(stream: BinaryIO, tail: bytes) -> object:
    """The page tree's /Count, read the strict way with every stream capped; raises
    whatever pypdf raises for a file that needs repair."""
    _check_xref_size(stream, tail)
    with apply_configuration(**_ACCEPT_LIMITS):
        reader = _decrypted(_UnrepairedReader(stream, strict=True, root_object_recovery_limit=0))
        return reader.root_object["/Pages"]["/Count"]


def inspect(stream: BinaryIO, *, limits: AcceptLimits, deadline: Deadline) -> Inspection:
    """The page count the file states, without walking its pages or repairing it."""
    tail = _tail(stream, deadline)
    if b"%%EOF" not in tail:
        raise UnreadableDocument(
            "The PDF is incomplete (it has no end-of-file marker); it may have been cut off "
            "during transfer. Please upload the whole file again.",
            code="truncated_pdf",
        )
    try:
        pages, estimated = _stated_pages(stream, tail), False
    except UnreadableDocument:
        raise
    except Exception as exc:  # pypdf raises many types for what strict mode refuses
        logger.info("PDF needs repair; estimating its pages at accept: %s", exc)
        pages, estimated = _count_page_objects(stream, deadline), True
    finally:
        stream.seek(0)
    deadline.check()
    pages = check_page_count(pages, limit=limits.max_pages, what="PDF")
    return Inspection(kind=KIND, pages=pages, estimated=estimated)


def _tail(stream: BinaryIO, deadline: Deadline) -> bytes:
    """The last bytes of the file before any padding (NULs and whitespace, as some
    producers and transfers append), where the end-of-file marker belongs. Linear in
    the padding, read backwards in blocks."""
    end = stream.seek(0, 2)
    block = _TRAILER_WINDOW  # enough for nearly every file, whose end is not padded
    while end > 0:
        start = max(end - block, 0)
        stream.seek(start)
        kept = stream.read(end - start).rstrip(_PADDING)
        if kept:
            end = start + len(kept)
            break
        end, block = start, _SCAN_BLOCK
        deadline.check()
    stream.seek(max(end - _TRAILER_WINDOW, 0))
    tail = stream.read(min(end, _TRAILER_WINDOW))
    stream.seek(0)
    return tail


def _check_xref_size(stream: BinaryIO, tail: bytes) -> None:
    """Refuse to read, in the request, a cross-reference table longer than
    _MAX_XREF_ENTRIES (pypdf reads its entries one by one in Python): the file is
    estimated instead. Reads the first subsection's header where startxref points."""
    at = tail.rfind(b"startxref")
    offset = tail[at + len(b"startxref") :].split()[:1] if at >= 0 else []
    if not offset or not offset[0].isdigit():
        return  # pypdf says what is wrong with it
    stream.seek(int(offset[0]))
    header = stream.read(64).split()
    stream.seek(0)
    if header[:1] == [b"xref"] and len(header) > 2 and header[2].isdigit():
        if int(header[2]) > _MAX_XREF_ENTRIES:
            raise PdfReadError("too many cross-reference entries to read at accept")


# "/Type /Page" (not "/Pages") marks a page object. Compressed object streams
# (/ObjStm) hide them: then the count is only known to be at least one.
_PAGE_MARKERS = (b"/Type/Page", b"/Type /Page")
_OBJECT_STREAM = b"/ObjStm"


def _count_page_objects(stream: BinaryIO, deadline: Deadline) -> int:
    """Page objects in the raw bytes: fixed-string counts over blocks, linear in the size.
    A file with none, and no compressed objects that could hold them, is damaged."""
    patterns = [(marker, +1) for marker in _PAGE_MARKERS] + [
        (marker + b"s", -1) for marker in _PAGE_MARKERS
    ]
    hidden = 0
    keep = max(len(pattern) for pattern, _ in patterns) - 1
    stream.seek(0)
    count, carry = 0, b""
    while True:
        block = stream.read(_SCAN_BLOCK)
        data = carry + block
        # Count what starts before `decided`; the tail may begin a marker the next
        # block completes, so it is kept and counted then.
        decided = len(data) - keep if block else len(data)
        for pattern, sign in patterns:
            count += sign * data[: max(decided, 0) + len(pattern) - 1].count(pattern)
        hidden += data[: max(decided, 0) + len(_OBJECT_STREAM) - 1].count(_OBJECT_STREAM)
        if not block:
            if count < 1 and not hidden:
                raise _damaged("'s pages could not be found")
            return max(count, 1)
        carry = data[max(decided, 0) :]
        deadline.check()


def extract(data: bytes, *, limits: ExtractLimits, on_page: OnPage | None = None) -> Extracted:
    """Text of every page and the number of pages there really are (pypdf walks the page
    tree, whatever its /Count says). The tolerant parser repairs what it can. A page whose
    content cannot be read is left out and named, as a viewer shows the others; a file of
    which no page can be read is damaged."""
    try:
        reader = _decrypted(PdfReader(io.BytesIO(data), strict=False))
        pages = reader.pages
        total = len(pages)
    except (UnreadableDocument, BaseTimeoutException):
        raise
    except Exception as exc:
        raise _damaged() from exc
    if total < 1:
        raise _damaged("'s pages could not be found")
    check_page_count(total, limit=limits.max_pages)
    texts, chars, unreadable, error = [], 0, [], None
    for number, page in enumerate(pages, start=1):
        try:
            text = clean_extracted(page.extract_text() or "")
        except BaseTimeoutException:
            raise
        except Exception as exc:
            if caused_by(exc, MemoryError):
                raise  # the document's memory limit, which the stage judges
            unreadable.append(number)
            text, error = "", exc
        if len(text) > limits.max_chars_per_page:
            raise too_much_text(f"Page {number}", limits.max_chars_per_page)
        chars += len(text)
        if chars > limits.max_chars:
            raise too_much_text("The document", limits.max_chars)
        texts.append(text)
        if on_page is not None:
            on_page(number, total)
    if len(unreadable) == total:
        raise _damaged("'s pages could not be read") from error
    return Extracted(text="\n\n".join(texts), page_count=total, unreadable_pages=tuple(unreadable))
