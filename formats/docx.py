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

Its parts are found through the package's relationships, at accept and at
extract alike (formats/docx_package.py): Word Online names the body
`word/document2.xml`. Everything is read with a streaming parser (expat) that
refuses DTDs and entities. At accept it is bounded before it is read: the ZIP's
central directory by its end record, relationship parts by their size, the XML
by a byte budget. Extraction reads the body in document order (paragraphs,
tables row by row, nested tables, content controls, tracked insertions, text
boxes once, after the paragraph that anchors them), then each distinct header
and footer once, the footnotes, endnotes and comments (formats/docx_text.py);
deleted text and field instructions are not text. The body's headings (paragraphs
of a heading style, or with an outline level of their own) make the document's
outline, each with where its text starts.
"""

import io
import re
import zipfile
from itertools import accumulate
from typing import BinaryIO
from xml.parsers import expat

from core.errors import UnreadableDocument, UnsupportedFileType
from formats.base import (
    DOCX,
    MAX_OUTLINE_ENTRIES,
    MAX_TITLE_CHARS,
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
from formats.docx_package import (
    ZIP_ERRORS,
    Parts,
    check_directory,
    check_ratio,
    damaged,
    find_parts,
    safe_parser,
    too_large,
)
from formats.docx_text import BODY_TEXT_LEVEL, PartText, attribute, local_name, outline_level

KIND = DOCX
_ZIP_MAGIC = b"PK\x03\x04"
_APP_XML_MAX = 256 * 1024
_XML_BLOCK = 256 * 1024

# Styles based on styles: a chain longer than this (or a cycle) is not followed further.
MAX_STYLE_DEPTH = 16
# Word's built-in heading styles are named "heading 1" to "heading 9".
_HEADING_NUMBERS = frozenset("123456789")

# A run of letters longer than this counts as one word per LONG_WORD letters.
LONG_WORD = 24
# Ideographs, kana and their punctuation: Chinese and Japanese are written without spaces
# between words.
_CJK = re.compile(
    "[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f]"
)
CJK_PER_WORD = 2


def pages_for_markup(archive: zipfile.ZipFile, parts: Parts, *, bytes_per_page: int) -> int:
    """The pages the XML that extraction parses weighs, from the sizes the ZIP's directory
    states (a part's stated size is what zipfile lets it inflate to)."""
    markup = sum(archive.getinfo(name).file_size for name in parts.markup())
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
    """Pages from what the file states, else from its words; never extracts all its text.
    UnsupportedFileType for a ZIP that is not a Word document."""
    check_directory(stream)
    try:
        with zipfile.ZipFile(stream) as archive:
            ratio = limits.docx_max_compression_ratio
            parts = find_parts(archive, ratio=ratio)
            claimed = sum(info.file_size for info in archive.infolist())
            if claimed > limits.docx_max_uncompressed_bytes:
                raise too_large()
            for name in parts.markup():
                check_ratio(archive.getinfo(name), ratio)
            markup_pages = pages_for_markup(
                archive, parts, bytes_per_page=limits.docx_markup_bytes_per_page
            )
            stated_pages, stated_words = app_properties(archive, parts.properties)
            deadline.check()
            if stated_pages or stated_words:
                words = stated_words or 0
            else:
                words = _estimate_words(archive, archive.getinfo(parts.main), limits, deadline)
    except (UnsupportedFileType, UnreadableDocument):
        raise
    except (*ZIP_ERRORS, ValueError) as exc:
        raise damaged() from exc
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


def app_properties(archive: zipfile.ZipFile, name: str | None) -> tuple[int, int]:
    """(pages, words) as the properties part `name` (docProps/app.xml) states them; 0
    where it does not."""
    if name is None:
        return 0, 0
    try:
        with archive.open(name) as fh:
            xml = fh.read(_APP_XML_MAX)
    except (KeyError, *ZIP_ERRORS):
        return 0, 0  # a hint we cannot read is no hint
    found: dict[str, str] = {}
    current: list[str] = []
    parser = safe_parser()
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


class _Styles:
    """The paragraph styles of a styles part as it streams past: for each style id, its
    own outline level (None when it sets none), its name and the style it is based on."""

    def __init__(self) -> None:
        self.styles: dict[str, tuple[int | None, str, str]] = {}
        self._current: list | None = None

    def start(self, name: str, attrs) -> None:
        local = local_name(name)
        if local == "style":
            # A style that names no type is a paragraph style: the default of w:type.
            paragraph = (attribute(attrs, "type") or "paragraph") == "paragraph"
            style_id = attribute(attrs, "styleId")
            self._current = [style_id, None, "", ""] if paragraph and style_id else None
        elif self._current is not None:
            if local == "outlineLvl":
                self._current[1] = outline_level(attribute(attrs, "val"))
            elif local == "name":
                self._current[2] = attribute(attrs, "val")
            elif local == "basedOn":
                self._current[3] = attribute(attrs, "val")

    def end(self, name: str) -> None:
        if local_name(name) == "style" and self._current is not None:
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


def heading_styles(archive: zipfile.ZipFile, name: str | None) -> dict[str, int]:
    """The document's heading styles by style id, with their outline level (0 at the
    top), from the styles part `name`; none when it has no styles part or one that
    cannot be read (its text still can)."""
    if name is None:
        return {}
    styles = _Styles()
    parser = safe_parser()
    parser.StartElementHandler = styles.start
    parser.EndElementHandler = styles.end
    try:
        with archive.open(name) as fh:
            while block := fh.read(_XML_BLOCK):
                parser.Parse(block, False)
            parser.Parse(b"", True)
    except (KeyError, expat.ExpatError, ValueError, *ZIP_ERRORS):
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
        local = local_name(name)
        if local == "t":
            self._in_text = True
        elif local in ("tab", "br", "cr"):
            self.count.end_word()

    def end(self, name: str) -> None:
        local = local_name(name)
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
    parser = safe_parser()
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
    except (expat.ExpatError, ValueError, *ZIP_ERRORS) as exc:
        raise damaged() from exc
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
            try:
                package = find_parts(archive)
            except UnsupportedFileType as exc:  # accepted as Word once: damaged since
                raise damaged() from exc
            # What it states and what its markup weighs are charged if they are more than
            # its words: known first.
            stated_pages, _ = app_properties(archive, package.properties)
            markup_pages = pages_for_markup(
                archive, package, bytes_per_page=limits.docx_markup_bytes_per_page
            )
            floor_pages = max(stated_pages, markup_pages)
            check_page_budget(floor_pages, budget=page_budget, complete=False)
            styles = heading_styles(archive, package.styles)
            body = PartText(counted, budget=limits.max_chars, heading_styles=styles)
            _read_part(archive, package.main, body)

            def uncounted(name: str) -> tuple[str, ...]:
                """A part's text blocks, which add no pages."""
                blocks: list[str] = []
                reader = PartText(lambda block, _: blocks.append(block), budget=limits.max_chars)
                _read_part(archive, name, reader)
                return tuple(text for block in blocks if (text := cleaned(block)))

            # Beside the body, after it in this order: headers, footers (each distinct one
            # once: a section's first-page, even and odd ones often say the same),
            # footnotes, endnotes, comments. Only the body and the notes count as pages.
            seen: set[tuple[str, ...]] = set()
            for name in package.headers + package.footers:
                if (kept := uncounted(name)) and kept not in seen:
                    seen.add(kept)
                    parts.extend(kept)
            for name in (package.footnotes, package.endnotes):
                if name:
                    # A note's paragraphs are no sections of the document.
                    notes = PartText(lambda block, _: counted(block), budget=limits.max_chars)
                    _read_part(archive, name, notes)
            if package.comments:
                parts.extend(uncounted(package.comments))
    except UnreadableDocument:  # a refusal (DeadlinePassed is one), not damage
        raise
    except (expat.ExpatError, ValueError, KeyError, *ZIP_ERRORS) as exc:
        raise damaged() from exc
    counted_pages = pages_for_words(words.words, words_per_page=limits.docx_words_per_page)
    pages = check_page_count(max(counted_pages, floor_pages), limit=limits.max_pages)
    # Where each part starts in the text they make, joined by blank lines.
    starts = list(accumulate((len(part) + 2 for part in parts), initial=0))
    outline = tuple(
        Heading(title=title, level=level, offset=starts[at]) for at, title, level in headings
    )
    return Extracted(text="\n\n".join(parts), page_count=pages, outline=outline, engine=WORD_XML)


def _read_part(archive: zipfile.ZipFile, name: str, body: PartText) -> None:
    parser = safe_parser()
    parser.StartElementHandler = body.start
    parser.EndElementHandler = body.end
    parser.CharacterDataHandler = body.text
    with archive.open(name) as fh:
        while block := fh.read(_XML_BLOCK):
            parser.Parse(block, False)
        parser.Parse(b"", True)
