"""Text extraction, cleaning and chunking. Pure functions, no database."""

import io
import math
import re
import unicodedata
import zipfile
from dataclasses import dataclass

from django.conf import settings
from rq.timeouts import BaseTimeoutException

from documents.filetypes import docx_app_properties


class UnreadableInput(Exception):
    """The document cannot be read: damaged, encrypted or not what it claims to be."""


@dataclass(frozen=True)
class Extracted:
    text: str
    page_count: int


def extract_pdf(data: bytes, *, on_page=None) -> Extracted:
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableInput(
                "The PDF is protected by a password. Remove the password and upload it again."
            )
        pages = reader.pages
        total = len(pages)
    except (UnreadableInput, BaseTimeoutException):
        raise
    except Exception as exc:
        raise UnreadableInput("The PDF could not be read; the file appears to be damaged.") from exc
    if total < 1:
        raise UnreadableInput("The PDF's pages could not be found; the file appears to be damaged.")
    limit = settings.PAPERLANE_MAX_PAGES_PER_DOCUMENT
    if total > limit:
        raise UnreadableInput(f"The document has {total} pages; the most we accept is {limit}.")
    texts = []
    for number, page in enumerate(pages, start=1):
        try:
            texts.append(page.extract_text() or "")
        except BaseTimeoutException:
            raise
        except Exception as exc:
            raise UnreadableInput(
                f"Page {number} of the PDF could not be read; the file appears to be damaged."
            ) from exc
        if on_page is not None:
            on_page(number, total)
    return Extracted(text="\n\n".join(texts), page_count=total)


def extract_docx(data: bytes) -> Extracted:
    from docx import Document as DocxDocument

    try:
        document = DocxDocument(io.BytesIO(data))
        parts = [p.text for p in document.paragraphs]
        for table in document.tables:
            for row in table.rows:
                parts.append("\t".join(cell.text for cell in row.cells))
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            stated_pages, _ = docx_app_properties(archive, set(archive.namelist()))
    except BaseTimeoutException:
        raise
    except Exception as exc:
        raise UnreadableInput(
            "The Word document could not be read; the file appears to be damaged."
        ) from exc
    text = "\n\n".join(part for part in parts if part.strip())
    # Word files carry no layout; the page count Word saved is the best measure,
    # else the same word-based estimate the quota reservation used.
    words = len(text.split())
    pages = stated_pages or max(1, math.ceil(words / settings.PAPERLANE_DOCX_WORDS_PER_PAGE))
    return Extracted(text=text, page_count=pages)


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SPACES = re.compile(r"[ \t\u00a0]+")
_BLANK_LINES = re.compile(r"\n\s*\n+")
_HYPHEN_BREAK = re.compile(r"(\w)-\n(\w)")


def clean_text(text: str) -> str:
    """Normalise extracted text: unicode form, control characters, spacing, broken words."""
    text = unicodedata.normalize("NFKC", text)
    text = _CONTROL.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
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
