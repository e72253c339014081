"""Word (.docx): recognise and estimate pages at accept; text and pages at extract.

A .docx carries no layout, so its pages are counted from its words
(`docx_words_per_page`). What the file states in `docProps/app.xml` is written
by whoever made the file (python-docx writes `<Pages>1</Pages>` for every
document): at accept it is a hint, and extraction charges the larger of the
word count's pages and the stated pages. Reading a document costs what its
markup weighs, not what its words say (190 MB of empty paragraphs hold no
word and take a minute to parse): both charge at least a page for each
`docx_markup_bytes_per_page` of the XML extraction parses, known from the ZIP's
directory before anything is inflated, and the accept path refuses a part
that inflates more than `docx_max_compression_ratio` times its stored size.
Words are counted so that text written without spaces is not free: two CJK
ideographs or kana make a word, and a run of letters longer than LONG_WORD
counts once per LONG_WORD letters.

Everything is read with a streaming parser (expat) that refuses DTDs and
entities. At accept it is bounded before it is read: the ZIP's central
directory by its end record, the XML by a byte budget. Extraction reads the
body in document order (paragraphs, tables row by row, nested tables, content
controls, tracked insertions, text boxes once), then each distinct header and
footer once, the footnotes, endnotes and comments; deleted text and field codes
are not text. The body's headings (paragraphs of a heading style, or with an outline
level of their own) make the document's outline, each with where its text starts.
"""

import io
import re
import struct
import zipfile
import zlib
from collections.abc import Callable
from itertools import accumulate
from typing import BinaryIO
from xml.parsers import expat

from core.errors import UnreadableDocument, UnsupportedFileType
from formats.base import (
    DOCX,
    MAX_OUTLINE_ENTRIES,
    MAX_TITLE_CHARS,
    SUPPORTED,
    WORD_XML,
    AcceptLimits,
    Deadline,
    Extracted,
    ExtractLimits,
    Heading,
    Inspection,
    check_page_budget,
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
# The same vocabulary in ISO 29500 Strict.
W_STRICT = "http://purl.oclc.org/ooxml/wordprocessingml/main"
# mc:Fallback repeats what mc:Choice holds (a text box, drawn twice) for older readers.
_FALLBACK = "http://schemas.openxmlformats.org/markup-compatibility/2006 Fallback"
BODY = "word/document.xml"
STYLES = "word/styles.xml"
# An outline level of 9 is body text; 0 to 8 are heading levels ("Heading 1" is 0).
BODY_TEXT_LEVEL = 9
# Styles based on styles: a chain longer than this (or a cycle) is not followed further.
MAX_STYLE_DEPTH = 16
# Word's built-in heading styles are named "heading 1" to "heading 9".
_HEADING_NUMBERS = frozenset("123456789")
# The outline levels of headings, as w:outlineLvl writes them.
_HEADING_LEVELS = frozenset("012345678")
# What a reader sees beside the body, after it in this order: headers, footers (each
# distinct one once: a section's first-page, even and odd ones often say the same),
# footnotes, endnotes, comments. Only the body and the notes count towards the pages.
_HEADERS = re.compile(r"word/header(\d*)\.xml")
_FOOTERS = re.compile(r"word/footer(\d*)\.xml")
_NOTES = ("word/footnotes.xml", "word/endnotes.xml")
_COMMENTS = "word/comments.xml"
# Errors reading a member of a damaged or unusual ZIP (bad deflate data, a compression
# method or encryption zipfile does not support, a cut-off member).
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    NotImplementedError,
    RuntimeError,
    EOFError,
    OSError,
)

# A run of letters longer than this counts as one word per LONG_WORD letters.
LONG_WORD = 24
# Ideographs, kana and their punctuation: Chinese and Japanese are written without spaces
# between words.
_CJK = re.compile(
    "[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f]"
)
CJK_PER_WORD = 2


def _damaged() -> UnreadableDocument:
    return UnreadableDocument(
        "The Word document could not be read; the file appears to be damaged.",
        code="damaged_docx",
    )


def _too_large() -> UnreadableDocument:
    return UnreadableDocument(
        "The Word document expands to more data than we accept.", code="docx_too_large"
    )


def _too_compressed(name: str, ratio: int) -> UnreadableDocument:
    return UnreadableDocument(
        f"The Word document's {name} expands to more than {ratio} times its size in the "
        "file, which Word never writes; saving it again from Word may help.",
        code="docx_too_compressed",
    )


def _parsed(name: str) -> bool:
    """Whether extraction parses the part `name` (the body, styles, headers, footers,
    notes and comments)."""
    return (
        name in (BODY, STYLES, _COMMENTS, *_NOTES)
        or _HEADERS.fullmatch(name) is not None
        or _FOOTERS.fullmatch(name) is not None
    )


def pages_for_markup(members: list[zipfile.ZipInfo], *, bytes_per_page: int) -> int:
    """The pages the XML that extraction parses weighs, from the sizes the ZIP's directory
    states (a part's stated size is what zipfile lets it inflate to)."""
    markup = sum(info.file_size for info in members if _parsed(info.filename))
    return max(1, _ceil(markup, bytes_per_page))


def matches(head: bytes) -> bool:
    return head.startswith(_ZIP_MAGIC)


def _ceil(count: int, per: int) -> int:
    return -(-count // per)


def pages_for_words(words: int, *, words_per_page: int) -> int:
    """The page count of `words` words of running text."""
    return max(1, _ceil(words, words_per_page))


class WordCount:
    """Words of running text fed in pieces, as a parser hands them over: a piece that
    does not start with a space continues the word the last one ended in, and
    `end_word` marks a boundary the text does not show (a paragraph's end, a tab)."""

    def __init__(self) -> None:
        self._words = self._run = self._cjk = 0

    def feed(self, data: str) -> None:
        spaced, ideographs = _CJK.subn(" ", data)
        if ideographs:
            self._cjk += ideographs
            data = spaced
        tokens = data.split()
        if not tokens:
            if data:
                self.end_word()
            return
        if data[0].isspace():
            self.end_word()
        self._run += len(tokens[0])
        for token in tokens[1:]:
            self.end_word()
            self._run = len(token)
        if data[-1].isspace():
            self.end_word()

    def end_word(self) -> None:
        if self._run:
            self._words += _ceil(self._run, LONG_WORD)
            self._run = 0

    @property
    def words(self) -> int:
        pending = _ceil(self._run, LONG_WORD) if self._run else 0
        return self._words + pending + _ceil(self._cjk, CJK_PER_WORD)


def inspect(stream: BinaryIO, *, limits: AcceptLimits, deadline: Deadline) -> Inspection:
    """Pages from what the file states, else from its words; never extracts all its text."""
    _check_directory(stream)
    try:
        with zipfile.ZipFile(stream) as archive:
            members = {info.filename: info for info in archive.infolist()}
            document = members.get("word/document.xml")
            if document is None:
                raise UnsupportedFileType(
                    f"{SUPPORTED}; this is a ZIP archive that is not a Word document."
                )
            claimed = sum(info.file_size for info in members.values())
            if claimed > limits.docx_max_uncompressed_bytes:
                raise _too_large()
            _check_compression(members.values(), limits.docx_max_compression_ratio)
            markup_pages = pages_for_markup(
                list(members.values()), bytes_per_page=limits.docx_markup_bytes_per_page
            )
            stated_pages, stated_words = app_properties(archive)
            deadline.check()
            if stated_pages or stated_words:
                words = stated_words or 0
            else:
                words = _estimate_words(archive, document, limits, deadline)
    except (UnsupportedFileType, UnreadableDocument):
        raise
    except (*_ZIP_ERRORS, ValueError) as exc:
        raise _damaged() from exc
    finally:
        stream.seek(0)
    pages = max(
        stated_pages,
        markup_pages,
        pages_for_words(words, words_per_page=limits.docx_words_per_page),
    )
    return Inspection(
        kind=KIND, pages=check_page_count(pages, limit=limits.max_pages), estimated=True
    )


# Parts smaller than this inflated may compress as well as they like (a blank header).
_RATIO_FLOOR_BYTES = 1024 * 1024


def _check_compression(members, ratio: int) -> None:
    """Refuse a part extraction parses that inflates more than `ratio` times its stored
    size, from the sizes the directory states (zipfile inflates no further than those)."""
    for info in members:
        if (
            _parsed(info.filename)
            and info.file_size > _RATIO_FLOOR_BYTES
            and info.file_size > ratio * max(info.compress_size, 1)
        ):
            raise _too_compressed(info.filename, ratio)


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
    except (KeyError, *_ZIP_ERRORS):
        return 0, 0  # a hint we cannot read is no hint
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
        return int(value) if value.isascii() and value.isdigit() and len(value) <= 9 else 0

    return number("Pages"), number("Words")


def _local(name: str) -> str:
    """An element's name in the WordprocessingML namespace, whatever its prefix; "" for
    every other namespace."""
    namespace, _, local = name.rpartition(" ")
    return local if namespace in (W, W_STRICT) else ""


def _value(attrs) -> str:
    """An element's w:val attribute, in either vocabulary."""
    return attrs.get(f"{W} val") or attrs.get(f"{W_STRICT} val") or ""


def _outline_level(value: str) -> int:
    """A w:outlineLvl value as a level; BODY_TEXT_LEVEL for body text or nonsense."""
    return int(value) if value in _HEADING_LEVELS else BODY_TEXT_LEVEL


class _Body:
    """The text of a WordprocessingML part as it streams past, in document order, handed
    to `emit` a block at a time: a paragraph, or a table row (its cells joined by tabs,
    a cell's paragraphs and nested rows by newlines), with the paragraph's heading level
    (None for a row or a paragraph that is not a heading; `heading_styles` names the
    heading styles). Text is what `t` elements hold; a tab or a break inside a run is
    kept; what mc:Fallback repeats is skipped."""

    def __init__(
        self,
        emit: Callable[[str, int | None], None],
        *,
        budget: int,
        heading_styles: dict[str, int] | None = None,
    ) -> None:
        self._emit = emit
        self._heading_styles = heading_styles or {}
        self._levels: list[int | None] = []  # of the open paragraphs
        self._changes = 0  # inside a tracked change of paragraph properties (the old ones)
        # The text taken in may not pass `budget` characters however it is split into
        # paragraphs: one endless paragraph is refused as it grows.
        self._budget, self._left = budget, budget
        self._paragraphs: list[list[str]] = []  # open paragraphs: text boxes nest them
        self._cells: list[list[str]] = []
        self._rows: list[list[str]] = []
        self._in_text = False
        self._runs = 0
        self._fallback = 0

    def start(self, name: str, attrs) -> None:
        if self._fallback or name == _FALLBACK:
            self._fallback += name == _FALLBACK
            return
        local = _local(name)
        if local == "p":
            self._paragraphs.append([])
            self._levels.append(None)
        elif local == "pPrChange":
            self._changes += 1
        elif local == "pStyle" and self._levels and not self._changes:
            self._levels[-1] = self._heading_styles.get(_value(attrs))
        elif local == "outlineLvl" and self._levels and not self._changes:
            # The paragraph's own level, after its style in pPr: it overrides the style's.
            level = _outline_level(_value(attrs))
            self._levels[-1] = level if level < BODY_TEXT_LEVEL else None
        elif local == "t":
            self._in_text = True
        elif local == "r":
            self._runs += 1
        elif local in ("tab", "br", "cr") and self._runs and self._paragraphs:
            self._paragraphs[-1].append("\t" if local == "tab" else "\n")
        elif local == "tc":
            self._cells.append([])
        elif local == "tr":
            self._rows.append([])

    def end(self, name: str) -> None:
        if self._fallback:
            self._fallback -= name == _FALLBACK
            return
        local = _local(name)
        if local == "t":
            self._in_text = False
        elif local == "r":
            self._runs -= 1
        elif local == "pPrChange":
            self._changes -= 1
        elif local == "p" and self._paragraphs:
            self._add("".join(self._paragraphs.pop()), self._levels.pop())
        elif local == "tc" and self._cells:
            cell = "\n".join(text for text in self._cells.pop() if text.strip())
            if self._rows:
                self._rows[-1].append(cell)
        elif local == "tr" and self._rows:
            self._add("\t".join(self._rows.pop()), None)

    def text(self, data: str) -> None:
        if self._in_text and not self._fallback and self._paragraphs:
            self._left -= len(data)
            if self._left < 0:
                raise too_much_text("The document", self._budget)
            self._paragraphs[-1].append(data)

    def _add(self, block: str, level: int | None) -> None:
        if self._cells:
            self._cells[-1].append(block)  # a paragraph or a nested table's row in a cell
        else:
            self._emit(block, level)


class _Styles:
    """The paragraph styles of a styles part as it streams past: for each style id, its
    own outline level (None when it sets none), its name and the style it is based on."""

    def __init__(self) -> None:
        self.styles: dict[str, tuple[int | None, str, str]] = {}
        self._current: list | None = None

    def start(self, name: str, attrs) -> None:
        local = _local(name)
        if local == "style":
            # A style that names no type is a paragraph style: the default of w:type.
            kind = attrs.get(f"{W} type") or attrs.get(f"{W_STRICT} type") or "paragraph"
            paragraph = kind == "paragraph"
            style_id = attrs.get(f"{W} styleId") or attrs.get(f"{W_STRICT} styleId") or ""
            self._current = [style_id, None, "", ""] if paragraph and style_id else None
        elif self._current is not None:
            if local == "outlineLvl":
                self._current[1] = _outline_level(_value(attrs))
            elif local == "name":
                self._current[2] = _value(attrs)
            elif local == "basedOn":
                self._current[3] = _value(attrs)

    def end(self, name: str) -> None:
        if _local(name) == "style" and self._current is not None:
            style_id, level, style_name, based_on = self._current
            self.styles.setdefault(style_id, (level, style_name, based_on))
            self._current = None

    def levels(self) -> dict[str, int]:
        """The heading styles and their levels: a style's own outline level, else that of
        Word's built-in "heading N" (N - 1), else its base style's."""
        found = {}
        for style_id in self.styles:
            at, level = style_id, None
            for _ in range(MAX_STYLE_DEPTH):
                if at not in self.styles:
                    break
                own, style_name, based_on = self.styles[at]
                if own is not None:
                    level = own
                    break
                words = style_name.lower().split()
                if len(words) == 2 and words[0] == "heading" and words[1] in _HEADING_NUMBERS:
                    level = int(words[1]) - 1
                    break
                at = based_on
            if level is not None and level < BODY_TEXT_LEVEL:
                found[style_id] = level
        return found


def heading_styles(archive: zipfile.ZipFile) -> dict[str, int]:
    """The document's heading styles by style id, with their outline level (0 at the
    top); none when it has no styles part or one that cannot be read (its text still can)."""
    styles = _Styles()
    parser = _parser()
    parser.StartElementHandler = styles.start
    parser.EndElementHandler = styles.end
    try:
        with archive.open(STYLES) as fh:
            while block := fh.read(_XML_BLOCK):
                parser.Parse(block, False)
            parser.Parse(b"", True)
    except (KeyError, expat.ExpatError, ValueError, *_ZIP_ERRORS):
        return {}
    return styles.levels()


class _WordCounter:
    """Counts the words of a WordprocessingML body as it streams past: the text of its
    `t` elements; a paragraph's end, a tab or a break separates words; runs within a
    paragraph join up."""

    def __init__(self) -> None:
        self.count = WordCount()
        self._in_text = False

    def start(self, name: str, attrs) -> None:
        local = _local(name)
        if local == "t":
            self._in_text = True
        elif local in ("tab", "br", "cr"):
            self.count.end_word()

    def end(self, name: str) -> None:
        local = _local(name)
        if local == "t":
            self._in_text = False
        elif local == "p":
            self.count.end_word()

    def text(self, data: str) -> None:
        if self._in_text:
            self.count.feed(data)


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
                    return counter.count.words
                read += len(block)
                deadline.check()
    except (expat.ExpatError, ValueError, *_ZIP_ERRORS) as exc:
        raise _damaged() from exc
    return counter.count.words * document.file_size // max(read, 1)


def extract(data: bytes, *, limits: ExtractLimits, page_budget: int | None = None) -> Extracted:
    """The text of the body, then of the headers and footers, footnotes, endnotes and
    comments; pages from the words of the body and notes, or more if the file states
    more or its markup weighs more. Pages are counted as the text is read: once they pass
    `page_budget` (the stated or markup pages, or the words so far), PagesOverBudget,
    and the rest is not read."""
    parts: list[str] = []
    # The body's headings: (the part they are, title, level).
    headings: list[tuple[int, str, int]] = []
    words = WordCount()
    chars = 0
    per_page = limits.docx_words_per_page

    def cleaned(block: str) -> str:
        nonlocal chars
        text = clean_extracted(block)
        chars += len(text)
        if chars > limits.max_chars:
            raise too_much_text("The document", limits.max_chars)
        return text if text.strip() else ""

    def counted(block: str, level: int | None = None) -> None:
        if text := cleaned(block):
            if level is not None and len(headings) < MAX_OUTLINE_ENTRIES:
                if title := " ".join(text.split())[:MAX_TITLE_CHARS]:
                    headings.append((len(parts), title, level))
            parts.append(text)
            words.feed(text)
            words.end_word()
            pages = pages_for_words(words.words, words_per_page=per_page)
            check_page_budget(pages, budget=page_budget, complete=False)

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = archive.namelist()
            if BODY not in names:
                raise _damaged()
            # What it states and what its markup weighs are charged if they are more than
            # its words: known first.
            stated_pages, _ = app_properties(archive)
            markup_pages = pages_for_markup(
                archive.infolist(), bytes_per_page=limits.docx_markup_bytes_per_page
            )
            floor_pages = max(stated_pages, markup_pages)
            check_page_budget(floor_pages, budget=page_budget, complete=False)
            styles = heading_styles(archive)
            _read_part(
                archive, BODY, _Body(counted, budget=limits.max_chars, heading_styles=styles)
            )

            def uncounted(name: str) -> tuple[str, ...]:
                """A part's text blocks, which add no pages."""
                blocks: list[str] = []
                body = _Body(lambda block, _: blocks.append(block), budget=limits.max_chars)
                _read_part(archive, name, body)
                return tuple(text for block in blocks if (text := cleaned(block)))

            seen: set[tuple[str, ...]] = set()
            for name in _numbered(names, _HEADERS) + _numbered(names, _FOOTERS):
                if (kept := uncounted(name)) and kept not in seen:
                    seen.add(kept)
                    parts.extend(kept)
            for name in _NOTES:
                if name in names:
                    # A note's paragraphs are no sections of the document.
                    notes = _Body(lambda block, _: counted(block), budget=limits.max_chars)
                    _read_part(archive, name, notes)
            if _COMMENTS in names:
                parts.extend(uncounted(_COMMENTS))
    except UnreadableDocument:  # a refusal (DeadlinePassed is one), not damage
        raise
    except (expat.ExpatError, ValueError, KeyError, *_ZIP_ERRORS) as exc:
        raise _damaged() from exc
    counted_pages = pages_for_words(words.words, words_per_page=limits.docx_words_per_page)
    pages = check_page_count(max(counted_pages, floor_pages), limit=limits.max_pages)
    # Where each part starts in the text they make, joined by blank lines.
    starts = list(accumulate((len(part) + 2 for part in parts), initial=0))
    outline = tuple(
        Heading(title=title, level=level, offset=starts[at]) for at, title, level in headings
    )
    return Extracted(text="\n\n".join(parts), page_count=pages, outline=outline, engine=WORD_XML)


def _numbered(names: list[str], pattern: re.Pattern[str]) -> list[str]:
    """The parts whose names match `pattern`, by their number (header1, header2, …)."""
    found = [(int(match[1] or 0), name) for name in names if (match := pattern.fullmatch(name))]
    return [name for _, name in sorted(found)]


def _read_part(archive: zipfile.ZipFile, name: str, body: _Body) -> None:
    parser = _parser()
    parser.StartElementHandler = body.start
    parser.EndElementHandler = body.end
    parser.CharacterDataHandler = body.text
    with archive.open(name) as fh:
        while block := fh.read(_XML_BLOCK):
            parser.Parse(block, False)
        parser.Parse(b"", True)
