"""Word (.docx): recognise, estimate pages (accept) and extract text (extract stage).

A .docx carries no layout, so its page count is what Word saved in
`docProps/app.xml`, or else an estimate from its words
(PAPERLANE_DOCX_WORDS_PER_PAGE); both rules live here, once.
"""

import io
import math
import re
import zipfile
from typing import BinaryIO

from django.conf import settings
from docx import Document as DocxDocument
from rq.timeouts import BaseTimeoutException

from core.errors import UnreadableDocument, UnsupportedFileType
from documents.formats.base import Extracted, Inspection, check_page_count
from documents.models import DocumentKind

KIND = DocumentKind.DOCX
_ZIP_MAGIC = b"PK\x03\x04"
_MAX_MEMBERS = 5000
_APP_XML_MAX = 1024 * 1024

DAMAGED = UnreadableDocument(
    "The Word document could not be read; the file appears to be damaged.", code="damaged_docx"
)


def matches(head: bytes) -> bool:
    return head.startswith(_ZIP_MAGIC)


def pages_for_words(words: int) -> int:
    """The estimated page count of `words` words of running text."""
    return max(1, math.ceil(words / settings.PAPERLANE_DOCX_WORDS_PER_PAGE))


def inspect(stream: BinaryIO) -> Inspection:
    """The page count Word saved, else an estimate from the words; never extracts text."""
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
                len(members) > _MAX_MEMBERS
                or sum(info.file_size for info in members)
                > settings.PAPERLANE_DOCX_MAX_UNCOMPRESSED_BYTES
            ):
                raise UnreadableDocument(
                    "The Word document expands to more data than we accept.", code="docx_too_large"
                )
            pages, words = app_properties(archive)
            if pages:
                return Inspection(kind=KIND, pages=check_page_count(pages), estimated=True)
            if words is None:
                words = _count_words(archive)
    except (UnsupportedFileType, UnreadableDocument):
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
        raise DAMAGED from exc
    finally:
        stream.seek(0)
    return Inspection(kind=KIND, pages=check_page_count(pages_for_words(words)), estimated=True)


_APP_PAGES = re.compile(rb"<(?:\w+:)?Pages>\s*(\d{1,9})\s*</(?:\w+:)?Pages>")
_APP_WORDS = re.compile(rb"<(?:\w+:)?Words>\s*(\d{1,12})\s*</(?:\w+:)?Words>")


def app_properties(archive: zipfile.ZipFile) -> tuple[int, int | None]:
    """(pages, words) as `docProps/app.xml` states them; 0 and None where it does not."""
    try:
        with archive.open("docProps/app.xml") as fh:
            xml = fh.read(_APP_XML_MAX)
    except KeyError:
        return 0, None
    pages = _APP_PAGES.search(xml)
    words = _APP_WORDS.search(xml)
    page_count = int(pages.group(1)) if pages else 0
    word_count = int(words.group(1)) if words and int(words.group(1)) > 0 else None
    return page_count, word_count


_TEXT_RUN = re.compile(rb"<w:t(?:\s[^>]*)?>([^<]*)</w:t>")


def _count_words(archive: zipfile.ZipFile) -> int:
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


def extract(data: bytes) -> Extracted:
    """Paragraph and table text; pages as Word saved them, else estimated from the words."""
    try:
        document = DocxDocument(io.BytesIO(data))
        parts = [p.text for p in document.paragraphs]
        for table in document.tables:
            for row in table.rows:
                parts.append("\t".join(cell.text for cell in row.cells))
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            stated_pages, _ = app_properties(archive)
    except BaseTimeoutException:
        raise
    except Exception as exc:
        raise DAMAGED from exc
    text = "\n\n".join(part for part in parts if part.strip())
    pages = stated_pages or pages_for_words(len(text.split()))
    return Extracted(text=text, page_count=pages)
