"""File formats, one module each (`pdf`, `docx`): what the accept path needs
(recognise the file by its bytes, count or estimate its pages without reading
its text, within a time budget) and what the extract stage needs (clean text
and the real page count, within limits). The rules a format has (passwords,
page limits, page estimates) are written once, in its module; `base` holds
what they share. The format modules read no settings: the limits are built
here from them and passed in.
"""

from typing import BinaryIO

from django.conf import settings

from core.errors import InvalidUpload, UnsupportedFileType
from documents.formats import docx, pdf
from documents.formats.base import (
    AcceptLimits,
    Deadline,
    Extracted,
    ExtractLimits,
    Inspection,
    OnPage,
)

__all__ = [
    "Extracted",
    "ExtractLimits",
    "Inspection",
    "extract",
    "extract_limits",
    "inspect_upload",
]

_SNIFF_BYTES = 2048

_KNOWN_OTHER_TYPES = [
    (b"\xd0\xcf\x11\xe0", "a legacy Word or Office (.doc) file; save it as .docx"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"{\\rtf", "an RTF document; save it as .docx or PDF"),
]


def accept_limits() -> AcceptLimits:
    return AcceptLimits(
        max_pages=settings.PAPERLANE_MAX_PAGES_PER_DOCUMENT,
        docx_words_per_page=settings.PAPERLANE_DOCX_WORDS_PER_PAGE,
        docx_max_uncompressed_bytes=settings.PAPERLANE_DOCX_MAX_UNCOMPRESSED_BYTES,
        docx_xml_budget_bytes=settings.PAPERLANE_ACCEPT_DOCX_XML_BUDGET_BYTES,
        seconds=settings.PAPERLANE_ACCEPT_INSPECT_SECONDS,
    )


def extract_limits() -> ExtractLimits:
    return ExtractLimits(
        max_pages=settings.PAPERLANE_MAX_PAGES_PER_DOCUMENT,
        max_chars_per_page=settings.PAPERLANE_MAX_CHARS_PER_PAGE,
        max_chars=settings.PAPERLANE_MAX_CHARS_PER_DOCUMENT,
        docx_words_per_page=settings.PAPERLANE_DOCX_WORDS_PER_PAGE,
    )


def inspect_upload(stream: BinaryIO) -> Inspection:
    """Tell the kind of the file from its bytes and count (or estimate) its pages,
    within PAPERLANE_ACCEPT_INSPECT_SECONDS."""
    limits = accept_limits()
    stream.seek(0)
    head = stream.read(_SNIFF_BYTES)
    stream.seek(0)
    if not head:
        raise InvalidUpload("The file is empty.", code="empty_file")
    for module in (pdf, docx):
        if module.matches(head):
            return module.inspect(stream, limits=limits, deadline=Deadline(limits.seconds))
    raise UnsupportedFileType(
        f"Only PDF and Word (.docx) files are supported; this file is {_describe(head)}."
    )


def extract(
    kind: str, data: bytes, limits: ExtractLimits, *, progress: OnPage | None = None
) -> Extracted:
    """The clean text and real page count of a document of `kind` (UnreadableDocument if
    it cannot be read or is over a limit). Reads no settings: safe in a child process."""
    if kind == pdf.KIND:
        return pdf.extract(data, limits=limits, on_page=progress)
    return docx.extract(data, limits=limits)


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
