"""What every format module gives, the limits they obey and the rules they share.

Pure: no models, no database, no Django settings read here, so extraction can
run in a child process that has nothing but these modules loaded. Limits come
in as arguments (`ExtractLimits`, `AcceptLimits`), built from the settings by
`documents.reading`.
"""

import re
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from core.errors import UnreadableDocument

PDF = "pdf"
DOCX = "docx"
# Pictures of paper (formats/image.py): every page read by OCR.
PNG = "png"
JPEG = "jpeg"
TIFF = "tiff"
# What reads the text: PDFium, pypdf (the PDFs PDFium cannot open), our Word reader.
PDFIUM = "pdfium"
PYPDF = "pypdf"
WORD_XML = "docx"
# The media type of each, as a file of that kind is served.
MEDIA_TYPES = {
    PDF: "application/pdf",
    DOCX: "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    PNG: "image/png",
    JPEG: "image/jpeg",
    TIFF: "image/tiff",
}
# The names a file of each kind has, and each kind in words, as a refusal names it.
EXTENSIONS = {
    PDF: (".pdf",),
    DOCX: (".docx",),
    PNG: (".png",),
    JPEG: (".jpg", ".jpeg"),
    TIFF: (".tif", ".tiff"),
}
DESCRIPTIONS = {
    PDF: "a PDF",
    DOCX: "a Word (.docx) document",
    PNG: "a PNG picture",
    JPEG: "a JPEG picture",
    TIFF: "a TIFF picture",
}
# What may be uploaded, in words; every refusal of another kind of file starts with
# SUPPORTED.
SUPPORTED_KINDS = "PDF, Word (.docx), PNG, JPEG and TIFF"
SUPPORTED = f"Only {SUPPORTED_KINDS} files are supported"


def kind_by_name(name: str) -> str | None:
    """The kind a file's name says it is (by its extension), None for none of ours."""
    name = name.lower()
    for kind, extensions in EXTENSIONS.items():
        if name.endswith(extensions):
            return kind
    return None

# Between two pages' text in a document's text (`Extracted.page_starts` count it).
PAGE_BREAK = "\n\n"

# Called with (pages done, pages in all) while text is extracted.
OnPage = Callable[[int, int], None]


@dataclass(frozen=True)
class Inspection:
    """What the accept path learns from a file without extracting its text."""

    kind: str
    pages: int
    # True when `pages` is a guess (words, page markers) rather than what the file states;
    # either way extraction counts the real pages and the charge follows them.
    estimated: bool


# Outline entries kept, and the length of a title: headings, not text.
MAX_OUTLINE_ENTRIES = 2000
MAX_TITLE_CHARS = 300


@dataclass(frozen=True)
class Heading:
    """An entry of a document's outline: a section title and its depth (0 at the top);
    for a PDF's bookmark the page it starts on (from 1; None when it points nowhere),
    for a Word heading, which has no page, where its text starts in the extracted text."""

    title: str
    level: int
    page: int | None = None
    offset: int | None = None

    def as_json(self) -> dict:
        """As DocumentText.outline keeps it: {"title", "level"} and "offset" where the
        heading has one, else "page"."""
        where = {"offset": self.offset} if self.offset is not None else {"page": self.page}
        return {"title": self.title, "level": self.level, **where}


@dataclass(frozen=True)
class Extracted:
    """The text of a whole document and its real page count."""

    text: str
    page_count: int
    # Pages whose text could not be read (a damaged content stream), numbered from 1.
    unreadable_pages: tuple[int, ...] = ()
    # Pages that were read and hold no text (a scan, a drawing): OCR would be needed.
    textless_pages: tuple[int, ...] = ()
    # Where each page's text starts in `text` (character offsets), when pages are known.
    page_starts: tuple[int, ...] = ()
    outline: tuple[Heading, ...] = ()
    # What read the text: PDFIUM, PYPDF or WORD_XML.
    engine: str = ""


@dataclass(frozen=True)
class ExtractLimits:
    max_pages: int
    max_chars_per_page: int
    max_chars: int
    docx_words_per_page: int
    # A Word document is charged at least a page for each this many bytes of the XML
    # extraction parses: reading it costs what its markup weighs, whatever its words.
    docx_markup_bytes_per_page: int


@dataclass(frozen=True)
class AcceptLimits:
    max_pages: int
    docx_words_per_page: int
    docx_markup_bytes_per_page: int
    docx_max_uncompressed_bytes: int
    # How much a part extraction parses may inflate, as a multiple of its stored size.
    docx_max_compression_ratio: int
    # Inflated document.xml read to count words at accept; the rest is extrapolated.
    docx_xml_budget_bytes: int
    # Wall-clock budget of the whole inspection of one upload.
    seconds: float
    # Cross-reference entries a PDF may list, all its sections together.
    pdf_max_objects: int


class DeadlinePassed(UnreadableDocument):
    """The file could not be read within the time it was given. The format modules' own
    time bound (RQ's job timeout never fires in the child they run in): their broad
    `except` clauses let it through, as a verdict on the time, not damage to the file."""


class Deadline:
    """The time an inspection may take; `check` refuses the file once it has passed."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._ends = time.monotonic() + seconds

    def check(self) -> None:
        """DeadlinePassed once the time is up."""
        if time.monotonic() > self._ends:
            raise too_slow(self.seconds)


def too_slow(seconds: float) -> DeadlinePassed:
    """The refusal of a file not checked within `seconds` (code inspection_too_slow)."""
    return DeadlinePassed(
        f"The file could not be checked within {seconds:g} seconds; it is too complex to "
        "accept. Saving it again from its application may help.",
        code="inspection_too_slow",
    )


def too_complex(why: str) -> UnreadableDocument:
    """A PDF whose structure is beyond what is read to accept it: `why` says how."""
    return UnreadableDocument(
        f"The PDF is too complex to accept: {why}. Saving it again from its application "
        "(or printing it to a new PDF) may help.",
        code="pdf_too_complex",
    )


class PagesOverBudget(Exception):
    """Extraction counted more pages than the document may be charged (its `budget`, the
    quota it can still have): `counted` so far, all of its pages when `complete`. Raised
    as soon as the count passes the budget, before the rest of the text is read."""

    def __init__(self, counted: int, budget: int, complete: bool) -> None:
        super().__init__(counted, budget, complete)
        self.counted, self.budget, self.complete = counted, budget, complete


def check_page_budget(pages: int, *, budget: int | None, complete: bool) -> None:
    """PagesOverBudget if `pages` counted so far pass `budget` (None: no budget)."""
    if budget is not None and pages > budget:
        raise PagesOverBudget(pages, budget, complete)


def check_page_count(pages: object, *, limit: int, what: str = "document") -> int:
    """A usable page count within `limit`, or UnreadableDocument."""
    if not isinstance(pages, int) or pages < 1:
        raise UnreadableDocument(
            f"The {what} has no readable pages; the file may be damaged.", code="no_pages"
        )
    if pages > limit:
        raise UnreadableDocument(
            f"The document has {pages} pages; the most we accept is {limit}.", code="too_many_pages"
        )
    return pages


def too_much_text(where: str, limit: int) -> UnreadableDocument:
    return UnreadableDocument(
        f"{where} has more text than we accept (the limit is {limit:,} characters).",
        code="too_much_text",
    )


# C0 controls but tab and newline, DEL, C1 controls, and lone surrogates (which
# cannot be encoded): PostgreSQL refuses NUL in text, and none of these is text.
_NOT_TEXT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def clean_extracted(text: str) -> str:
    """Extracted text fit to store and search: in Unicode's NFKC form (typeset
    ligatures such as "ﬁ" become the letters "fi", full-width forms plain ones),
    carriage returns become newlines, and control characters (but tabs and newlines)
    are dropped. Both passes are linear."""
    text = unicodedata.normalize("NFKC", text)
    return _NOT_TEXT.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
