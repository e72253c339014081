"""Cleaning extracted text and splitting it into chunks. Pure functions, no database."""

import re

from django.conf import settings

from documents.formats.base import clean_extracted

_SPACES = re.compile(r"[ \t\u00a0]+")
_BLANK_LINES = re.compile(r"\n\s*\n+")
_HYPHEN_BREAK = re.compile(r"(\w)-\n(\w)")


def clean_text(text: str) -> str:
    """Normalise extracted text: unicode form and control characters (as extraction
    stores it), spacing, broken words."""
    text = clean_extracted(text)
    text = _HYPHEN_BREAK.sub(r"\1\2", text)
    text = _SPACES.sub(" ", text)
    lines = [line.strip() for line in text.split("\n")]
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()


_BREAKS = ("\n\n", "\n", ". ", "? ", "! ", "; ", ", ", " ")


def split_chunks(text: str, *, size: int | None = None, overlap: int | None = None) -> list[str]:
    """Split text into chunks of at most `size` characters, ending at natural breaks
    where possible, each starting `overlap` characters before the previous one ended."""
    size = size or settings.PAPERLANE_CHUNK_CHARS
    overlap = settings.PAPERLANE_CHUNK_OVERLAP_CHARS if overlap is None else overlap
    if overlap >= size:
        raise ValueError("overlap must be smaller than the chunk size")
    chunks, start, length = [], 0, len(text)
    while start < length:
        end = min(start + size, length)
        if end < length:
            window = text[start:end]
            for mark in _BREAKS:
                cut = window.rfind(mark)
                if cut > size // 2:
                    end = start + cut + len(mark)
                    break
        chunk = text[start:end].strip()
        if chunk:
            chunks.append(chunk)
        if end >= length:
            break
        start = max(end - overlap, start + 1)
    return chunks
