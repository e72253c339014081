"""Recognise uploads by their content and count their pages cheaply.

Nothing here extracts text: the accept path only needs the kind and a page
count to reserve quota, and must stay fast for large files.
"""

import logging
import math
import re
import unicodedata
import zipfile
from dataclasses import dataclass
from typing import BinaryIO

from django.conf import settings
from pypdf import PdfReader

from documents.errors import InvalidUpload, UnreadableDocument, UnsupportedFileType
from documents.models import DocumentKind

logger = logging.getLogger(__name__)

_SNIFF_BYTES = 2048
# Some producers put junk before the header; readers accept it within 1 KiB.
_PDF_HEADER_WINDOW = 1024
_PDF_TRAILER_WINDOW = 2048
_ZIP_MAGIC = b"PK\x03\x04"
_DOCX_MAX_MEMBERS = 5000
_DOCX_APP_XML_MAX = 1024 * 1024

_KNOWN_OTHER_TYPES = [
    (b"\xd0\xcf\x11\xe0", "a legacy Word or Office (.doc) file; save it as .docx"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"{\\rtf", "an RTF document; save it as .docx or PDF"),
]


@dataclass(frozen=True)
class Inspection:
    kind: str
    pages: int
    # True when `pages` is an estimate that extraction will correct.
    estimated: bool


def filename_validate(name: str | None) -> str:
    """Return a plain, safe file name or refuse it. Never used to build paths."""
    name = unicodedata.normalize("NFC", (name or "").strip())
    if not name:
        raise InvalidUpload("The file has no name.", code="invalid_filename")
    if "/" in name or "\\" in name or name in {".", ".."} or name.startswith(".."):
        raise InvalidUpload(
            "The file name must be a plain name without folders or '..'.", code="invalid_filename"
        )
    if any(unicodedata.category(ch) in {"Cc", "Cf", "Zl", "Zp"} for ch in name):
        raise InvalidUpload("The file name contains control characters.", code="invalid_filename")
    if len(name) > settings.PAPERLANE_MAX_FILENAME_LENGTH:
        raise InvalidUpload(
            f"The file name is longer than {settings.PAPERLANE_MAX_FILENAME_LENGTH} characters.",
            code="invalid_filename",
        )
    return name


def inspect_upload(stream: BinaryIO) -> Inspection:
    """Tell the kind of the file from its bytes and count (or estimate) its pages."""
    stream.seek(0)
    head = stream.read(_SNIFF_BYTES)
    stream.seek(0)
    if not head:
        raise InvalidUpload("The file is empty.", code="empty_file")
    if b"%PDF-" in head[:_PDF_HEADER_WINDOW]:
        return Inspection(kind=DocumentKind.PDF, pages=_pdf_page_count(stream), estimated=False)
    if head.startswith(_ZIP_MAGIC):
        return Inspection(kind=DocumentKind.DOCX, pages=_docx_page_estimate(stream), estimated=True)
    raise UnsupportedFileType(
        f"Only PDF and Word (.docx) files are supported; this file is {_describe(head)}."
    )


def _describe(head: bytes) -> str:
    for magic, description in _KNOWN_OTHER_TYPES:
        if head.startswith(magic):
            return description
    text = head.lstrip().lower()
    if text.startswith((b"<!doctype html", b"<html", b"<head", b"<body")):
        return "an HTML page"
    if text.startswith(b"<?xml") or text.startswith(b"<"):
        return "XML or markup"
    return "of an unrecognised type"


def _check_page_count(pages: object) -> int:
    if not isinstance(pages, int) or pages < 1:
        raise UnreadableDocument(
            "The PDF has no readable pages; the file may be damaged.", code="no_pages"
        )
    limit = settings.PAPERLANE_MAX_PAGES_PER_DOCUMENT
    if pages > limit:
        raise UnreadableDocument(
            f"The document has {pages} pages; the most we accept is {limit}.", code="too_many_pages"
        )
    return pages


def _open_pdf(stream: BinaryIO) -> PdfReader:
    # Strict parsing reads only the xref table; the tolerant mode also visits
    # every object, so it is kept for files the strict parser refuses.
    try:
        return PdfReader(stream, strict=True)
    except Exception:  # any complaint: let the tolerant parser decide
        stream.seek(0)
        return PdfReader(stream, strict=False)


def _pdf_page_count(stream: BinaryIO) -> int:
    stream.seek(0, 2)
    size = stream.tell()
    stream.seek(max(size - _PDF_TRAILER_WINDOW, 0))
    tail = stream.read()
    stream.seek(0)
    if b"%%EOF" not in tail:
        raise UnreadableDocument(
            "The PDF is incomplete (it has no end-of-file marker); it may have been cut off "
            "during transfer. Please upload the whole file again.",
            code="truncated_pdf",
        )
    try:
        reader = _open_pdf(stream)
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableDocument(
                "The PDF is protected by a password. Remove the password and upload it again.",
                code="encrypted_pdf",
            )
        # The root page tree's /Count: no need to walk every page at accept time.
        pages = reader.root_object["/Pages"]["/Count"]
    except UnreadableDocument:
        raise
    except Exception as exc:  # pypdf raises many types for damaged input
        logger.info("unreadable PDF at accept: %s", exc)
        raise UnreadableDocument(
            "The PDF could not be read; the file appears to be damaged.", code="damaged_pdf"
        ) from exc
    finally:
        stream.seek(0)
    return _check_page_count(pages)


def _docx_page_estimate(stream: BinaryIO) -> int:
    try:
        with zipfile.ZipFile(stream) as archive:
            members = archive.infolist()
            names = {info.filename for info in members}
            if "word/document.xml" not in names:
                raise UnsupportedFileType(
                    "Only PDF and Word (.docx) files are supported; this is a ZIP archive "
                    "that is not a Word document."
                )
            if (
                len(members) > _DOCX_MAX_MEMBERS
                or sum(info.file_size for info in members)
                > settings.PAPERLANE_DOCX_MAX_UNCOMPRESSED_BYTES
            ):
                raise UnreadableDocument(
                    "The Word document expands to more data than we accept.", code="docx_too_large"
                )
            pages, words = docx_app_properties(archive, names)
            if pages:
                return _check_page_count(pages)
            if words is None:
                words = _docx_count_words(archive)
    except (UnsupportedFileType, UnreadableDocument):
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
        raise UnreadableDocument(
            "The Word document could not be read; the file appears to be damaged.",
            code="damaged_docx",
        ) from exc
    finally:
        stream.seek(0)
    return _check_page_count(max(1, math.ceil(words / settings.PAPERLANE_DOCX_WORDS_PER_PAGE)))


_APP_PAGES = re.compile(rb"<(?:\w+:)?Pages>\s*(\d{1,9})\s*</(?:\w+:)?Pages>")
_APP_WORDS = re.compile(rb"<(?:\w+:)?Words>\s*(\d{1,12})\s*</(?:\w+:)?Words>")


def docx_app_properties(archive: zipfile.ZipFile, names: set[str]) -> tuple[int, int | None]:
    if "docProps/app.xml" not in names:
        return 0, None
    with archive.open("docProps/app.xml") as fh:
        xml = fh.read(_DOCX_APP_XML_MAX)
    pages = _APP_PAGES.search(xml)
    words = _APP_WORDS.search(xml)
    page_count = int(pages.group(1)) if pages else 0
    word_count = int(words.group(1)) if words and int(words.group(1)) > 0 else None
    return page_count, word_count


_TEXT_RUN = re.compile(rb"<w:t(?:\s[^>]*)?>([^<]*)</w:t>")


def _docx_count_words(archive: zipfile.ZipFile) -> int:
    words = 0
    carry = b""
    with archive.open("word/document.xml") as fh:
        while chunk := fh.read(1024 * 1024):
            data = carry + chunk
            # Keep an unfinished tag for the next round so no text run is split.
            cut = data.rfind(b"<w:t")
            if cut == -1:
                cut = len(data)
            carry = data[cut:] if len(data) - cut < 64 * 1024 else b""
            for match in _TEXT_RUN.finditer(data[:cut] if carry else data):
                words += len(match.group(1).split())
    for match in _TEXT_RUN.finditer(carry):
        words += len(match.group(1).split())
    return words
