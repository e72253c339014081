"""Word (.docx): recognise and estimate pages at accept; text and pages at extract.

A .docx carries no layout, so its pages are counted from its words
(`docx_words_per_page`). What the file states in `docProps/app.xml` is written
by whoever made the file (python-docx writes `<Pages>1</Pages>` for every
document): at accept it is a hint, and extraction charges the larger of the
word count's pages and the stated pages.

Everything read at accept is bounded before it is read: the ZIP's central
directory by its end record, the XML by a byte budget, with a streaming parser
(expat) that refuses DTDs and entities.
"""

import io
import struct
import zipfile
from typing import BinaryIO
from xml.parsers import expat

from docx import Document as DocxDocument
from lxml import etree
from rq.timeouts import BaseTimeoutException

from core.errors import UnreadableDocument, UnsupportedFileType
from documents.formats.base import (
    DOCX,
    AcceptLimits,
    Deadline,
    Extracted,
    ExtractLimits,
    Inspection,
    check_page_count,
    clean_extracted,
    too_much_text,
)

KIND = DOCX
_ZIP_MAGIC = b"PK\x03\x04"
MAX_MEMBERS = 5000
# Room for MAX_MEMBERS entries with long names.
MAX_DIRECTORY_BYTES = 2 * 1024 * 1024
_APP_XML_MAX = 256 * 1024
_XML_BLOCK = 256 * 1024

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_TEXT, _PARAGRAPH = f"{W} t", f"{W} p"
_BREAKS = {f"{W} tab", f"{W} br", f"{W} cr"}


def _damaged() -> UnreadableDocument:
    return UnreadableDocument(
        "The Word document could not be read; the file appears to be damaged.",
        code="damaged_docx",
    )


def _too_large() -> UnreadableDocument:
    return UnreadableDocument(
        "The Word document expands to more data than we accept.", code="docx_too_large"
    )


def matches(head: bytes) -> bool:
    return head.startswith(_ZIP_MAGIC)


def pages_for_words(words: int, *, words_per_page: int) -> int:
    """The page count of `words` words of running text."""
    return max(1, -(-words // words_per_page))


def inspect(stream: BinaryIO, *, limits: AcceptLimits, deadline: Deadline) -> Inspection:
    """Pages from what the file states, else from its words; never extracts all its text."""
    _check_directory(stream)
    try:
        with zipfile.ZipFile(stream) as archive:
            members = {info.filename: info for info in archive.infolist()}
            document = members.get("word/document.xml")
            if document is None:
                raise UnsupportedFileType(
                    "Only PDF and Word (.docx) files are supported; this is a ZIP archive "
                    "that is not a Word document."
                )
            claimed = sum(info.file_size for info in members.values())
            if claimed > limits.docx_max_uncompressed_bytes:
                raise _too_large()
            stated_pages, stated_words = app_properties(archive)
            deadline.check()
            if stated_pages or stated_words:
                words = stated_words or 0
            else:
                words = _estimate_words(archive, document, limits, deadline)
    except (UnsupportedFileType, UnreadableDocument):
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
        raise _damaged() from exc
    finally:
        stream.seek(0)
    pages = max(stated_pages, pages_for_words(words, words_per_page=limits.docx_words_per_page))
    return Inspection(
        kind=KIND, pages=check_page_count(pages, limit=limits.max_pages), estimated=True
    )


def _check_directory(stream: BinaryIO) -> None:
    """Refuse a ZIP whose central directory is too big, from its end record alone,
    before anything parses the directory."""
    stream.seek(0, 2)
    size = stream.tell()
    window = min(size, 22 + 65535)  # the end record and the longest comment
    stream.seek(size - window)
    tail = stream.read(window)
    stream.seek(0)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        raise _damaged()
    entries, directory_bytes = struct.unpack("<10xHI4x", tail[at : at + 20])
    if entries == 0xFFFF or directory_bytes == 0xFFFFFFFF:
        # ZIP64: the real numbers are in the ZIP64 end record the locator points to.
        locator = tail[at - 20 : at]
        if len(locator) < 20 or not locator.startswith(b"PK\x06\x07"):
            raise _damaged()
        (record_at,) = struct.unpack("<8xQ4x", locator)
        stream.seek(record_at)
        record = stream.read(56)
        stream.seek(0)
        if len(record) < 56 or not record.startswith(b"PK\x06\x06"):
            raise _damaged()
        entries, directory_bytes = struct.unpack("<32xQQ8x", record)
    if entries > MAX_MEMBERS or directory_bytes > MAX_DIRECTORY_BYTES:
        raise _too_large()


def _parser() -> expat.XMLParserType:
    """A namespace-aware expat parser that refuses DTDs and entity declarations
    (a Word document has neither)."""

    def refuse(*args) -> None:
        raise ValueError("DTDs and entities are not allowed in a Word document")

    parser = expat.ParserCreate(namespace_separator=" ")
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    return parser


def app_properties(archive: zipfile.ZipFile) -> tuple[int, int]:
    """(pages, words) as `docProps/app.xml` states them; 0 where it does not."""
    try:
        with archive.open("docProps/app.xml") as fh:
            xml = fh.read(_APP_XML_MAX)
    except KeyError:
        return 0, 0
    found: dict[str, str] = {}
    current: list[str] = []
    parser = _parser()
    parser.StartElementHandler = lambda name, attrs: current.append(name.rpartition(" ")[2])
    parser.EndElementHandler = lambda name: current.pop()

    def text(data: str) -> None:
        if current and current[-1] in ("Pages", "Words"):
            found[current[-1]] = found.get(current[-1], "") + data

    parser.CharacterDataHandler = text
    try:
        parser.Parse(xml, True)
    except (expat.ExpatError, ValueError):
        return 0, 0  # a hint we cannot read is no hint

    def number(name: str) -> int:
        value = found.get(name, "").strip()
        return int(value) if value.isdigit() and len(value) <= 9 else 0

    return number("Pages"), number("Words")


class _WordCounter:
    """Counts words in a WordprocessingML body as it streams past: text inside `t`
    elements of the WordprocessingML namespace, whatever the prefix; a paragraph's
    end, a tab or a break separates words; runs within a paragraph join up."""

    def __init__(self) -> None:
        self.words = 0
        self._in_text = False
        self._in_word = False

    def start(self, name: str, attrs) -> None:
        if name == _TEXT:
            self._in_text = True
        elif name in _BREAKS:
            self._in_word = False

    def end(self, name: str) -> None:
        if name == _TEXT:
            self._in_text = False
        elif name == _PARAGRAPH:
            self._in_word = False

    def text(self, data: str) -> None:
        if not self._in_text or not data:
            return
        parts = data.split()
        if parts:
            joins_previous = self._in_word and not data[0].isspace()
            self.words += len(parts) - (1 if joins_previous else 0)
        self._in_word = not data[-1].isspace()


def _estimate_words(
    archive: zipfile.ZipFile, document: zipfile.ZipInfo, limits: AcceptLimits, deadline: Deadline
) -> int:
    """Words in the body, counted over the first `docx_xml_budget_bytes` of its XML and
    extrapolated to its stated size beyond that."""
    counter = _WordCounter()
    parser = _parser()
    parser.StartElementHandler = counter.start
    parser.EndElementHandler = counter.end
    parser.CharacterDataHandler = counter.text
    read = 0
    try:
        with archive.open(document) as fh:
            while read < limits.docx_xml_budget_bytes:
                block = fh.read(min(_XML_BLOCK, limits.docx_xml_budget_bytes - read))
                parser.Parse(block, not block)
                if not block:
                    return counter.words
                read += len(block)
                deadline.check()
    except (expat.ExpatError, ValueError) as exc:
        raise _damaged() from exc
    return counter.words * document.file_size // max(read, 1)


def extract(data: bytes, *, limits: ExtractLimits) -> Extracted:
    """Paragraph and table text; pages from the words, or more if the file states more."""
    try:
        document = DocxDocument(io.BytesIO(data))
        parts, chars = [], 0
        for block in _blocks(document):
            text = clean_extracted(block)
            chars += len(text)
            if chars > limits.max_chars:
                raise too_much_text("The document", limits.max_chars)
            if text.strip():
                parts.append(text)
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            stated_pages, _ = app_properties(archive)
    except (UnreadableDocument, BaseTimeoutException):
        raise
    except etree.XMLSyntaxError as exc:
        if _well_formed(data):
            # libxml2 reports an allocation that failed as a syntax error.
            raise MemoryError("the XML parser ran out of memory") from exc
        raise _damaged() from exc
    except Exception as exc:
        raise _damaged() from exc
    text = "\n\n".join(parts)
    counted = pages_for_words(len(text.split()), words_per_page=limits.docx_words_per_page)
    pages = check_page_count(max(counted, stated_pages), limit=limits.max_pages)
    return Extracted(text=text, page_count=pages)


def _well_formed(data: bytes) -> bool:
    """Whether the body's XML parses with the streaming parser, in little memory."""
    parser = _parser()
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive, archive.open("word/document.xml") as fh:
            while block := fh.read(_XML_BLOCK):
                parser.Parse(block, False)
            parser.Parse(b"", True)
    except (expat.ExpatError, ValueError, KeyError, zipfile.BadZipFile):
        return False
    return True


def _blocks(document):
    yield from (paragraph.text for paragraph in document.paragraphs)
    for table in document.tables:
        for row in table.rows:
            yield "\t".join(cell.text for cell in row.cells)
