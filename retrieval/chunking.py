"""Cleaning extracted text and splitting it into chunks that know where they come from:
their first and last page and the section they start in. Pure functions, no database.

Cleaning changes lengths (spaces collapse, broken words mend, Unicode forms change), so
offsets into the extracted text mean nothing in the cleaned one. The text is therefore
cut where a page or a heading starts, each piece is cleaned alone and the pieces are
joined by a blank line, as cleaning the whole would join them: where each piece lands in
the cleaned text is known, and a chunk's offsets give its pages and its section by
bisection. Pages and headings start after a blank line (extraction joins pages and
paragraphs so), where cleaning never joins text across the cut.
"""

import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate

from django.conf import settings

from documents.services.content import SECTION_CHARS
from formats.base import clean_extracted

# One character class each, repeated: linear, nothing to backtrack over.
_SPACES = re.compile(r"[ \t\u00a0]+")
_HYPHEN_BREAK = re.compile(r"(\w)-\n(\w)")
# What joins two pieces of cleaned text, as cleaning the whole text leaves a blank line.
_JOIN = "\n\n"


def clean_text(text: str) -> str:
    """Normalise extracted text: unicode form and control characters (as extraction
    stores it), spacing, broken words; lines trimmed, blank lines collapsed to one."""
    text = clean_extracted(text)
    text = _HYPHEN_BREAK.sub(r"\1\2", text)
    text = _SPACES.sub(" ", text)
    kept: list[str] = []
    blank = False
    for line in text.split("\n"):
        line = line.strip()
        if not line:
            blank = True
            continue
        if blank and kept:
            kept.append("")
        kept.append(line)
        blank = False
    return "\n".join(kept)


_BREAKS = ("\n\n", "\n", ". ", "? ", "! ", "; ", ", ", " ")
# How much of a chunk the next one repeats (PAPERLANE_CHUNK_CHARS must be longer).
OVERLAP_CHARS = 200


def split_spans(
    text: str, *, size: int | None = None, overlap: int | None = None
) -> list[tuple[int, int]]:
    """Where the chunks of `text` are: (start, end) offsets of pieces of at most `size`
    characters, ending at natural breaks where possible, each starting `overlap`
    characters before the previous one ended, without their surrounding whitespace."""
    size = size or settings.PAPERLANE_CHUNK_CHARS
    overlap = OVERLAP_CHARS if overlap is None else overlap
    if overlap >= size:
        raise ValueError("overlap must be smaller than the chunk size")
    spans, start, length = [], 0, len(text)
    while start < length:
        end = min(start + size, length)
        if end < length:
            window = text[start:end]
            for mark in _BREAKS:
                cut = window.rfind(mark)
                if cut > size // 2:
                    end = start + cut + len(mark)
                    break
        piece = text[start:end]
        kept = piece.strip()
        if kept:
            first = start + len(piece) - len(piece.lstrip())
            spans.append((first, first + len(kept)))
        if end >= length:
            break
        start = _word_start(text, max(end - overlap, start + 1), end)
    return spans


def _word_start(text: str, at: int, end: int) -> int:
    """`at`, or the next space before `end` if `at` is inside a word: an overlap starts
    with a whole word (a chunk of one long word keeps its cut)."""
    if text[at - 1].isspace():
        return at
    for position in range(at, end):
        if text[position].isspace():
            return position
    return at


def split_chunks(text: str, *, size: int | None = None, overlap: int | None = None) -> list[str]:
    """The chunks of `text` (see split_spans)."""
    return [text[start:end] for start, end in split_spans(text, size=size, overlap=overlap)]


@dataclass(frozen=True)
class Piece:
    """A chunk of a document's cleaned text, and where it comes from."""

    text: str
    # Its first and last page (from 1), None when the format has no pages.
    page_start: int | None
    page_end: int | None
    # The title of the section it starts in, "" before the first or without an outline.
    section: str


@dataclass(frozen=True)
class Cleaned:
    """A document's cleaned text, where each of its pages starts in it and where each
    section starts: (offset, title), in order."""

    text: str
    page_starts: tuple[int, ...]
    sections: tuple[tuple[int, str], ...]


def clean_document(
    text: str, *, page_starts: Sequence[int] = (), outline: Sequence[Mapping] = ()
) -> Cleaned:
    """`text` cleaned as clean_text cleans it, with the offsets of its pages
    (`page_starts`, offsets into `text`) and of its outline's headings carried over.
    A heading is {"title", "level", "page"} (a PDF's bookmark: the section starts where
    its page does) or {"title", "level", "offset"} (a Word heading: an offset into
    `text`); one pointing nowhere is left out."""
    length = len(text)
    # Out-of-order starts would be damage: each page starts no earlier than the last.
    starts = list(accumulate((min(max(int(s), 0), length) for s in page_starts), max))
    offsets = {
        entry["offset"]: None
        for entry in outline
        if isinstance(entry.get("offset"), int) and 0 <= entry["offset"] <= length
    }
    cuts = sorted({0, *starts, *offsets})
    parts: list[str] = []
    landed: dict[int, int] = {}
    position = 0
    for cut, following in zip(cuts, [*cuts[1:], length], strict=True):
        piece = clean_text(text[cut:following])
        # An empty piece lands where the next text will: an empty page shares the start of
        # the next page that has text.
        landed[cut] = position + (len(_JOIN) if parts else 0)
        if piece:
            parts.append(piece)
            position = landed[cut] + len(piece)
    page_positions = tuple(landed[start] for start in starts)
    sections = []
    for order, entry in enumerate(outline):
        title = " ".join(str(entry.get("title") or "").split())[:SECTION_CHARS]
        page, offset = entry.get("page"), entry.get("offset")
        if not title:
            continue
        if isinstance(offset, int) and offset in landed:
            sections.append((landed[offset], order, title))
        elif isinstance(page, int) and 1 <= page <= len(page_positions):
            sections.append((page_positions[page - 1], order, title))
    # By position, then outline order: of two on one page the later (deeper) one wins.
    sections.sort()
    return Cleaned(
        text=_JOIN.join(parts),
        page_starts=page_positions,
        sections=tuple((at, title) for at, _, title in sections),
    )


def chunk_document(
    text: str,
    *,
    page_starts: Sequence[int] = (),
    outline: Sequence[Mapping] = (),
    size: int | None = None,
    overlap: int | None = None,
) -> list[Piece]:
    """The chunks of a document's extracted text (split_spans over its cleaned text),
    each with its first and last page (when `page_starts` gives them) and the section it
    starts in (see clean_document)."""
    cleaned = clean_document(text, page_starts=page_starts, outline=outline)
    pages = cleaned.page_starts
    section_starts = [at for at, _ in cleaned.sections]
    pieces = []
    for start, end in split_spans(cleaned.text, size=size, overlap=overlap):
        first = last = None
        if pages:
            # Text before the first page's start (none, from our readers) counts as page 1.
            first = max(bisect_right(pages, start), 1)
            last = max(bisect_right(pages, end - 1), 1)
        found = bisect_right(section_starts, start)
        section = cleaned.sections[found - 1][1] if found else ""
        pieces.append(Piece(cleaned.text[start:end], first, last, section))
    return pieces
