"""File formats, one module each (`pdf`, `docx`): what the accept path needs
(recognise the file by its bytes, count or estimate its pages without reading
its text) and what the extract stage needs (text and the real page count).
The rules a format has (passwords, page limits, page estimates) are written
once, in its module.
"""

from typing import BinaryIO

from core.errors import InvalidUpload, UnsupportedFileType
from documents.formats import docx, pdf
from documents.formats.base import Extracted, Inspection, OnPage

__all__ = ["Extracted", "Inspection", "extract", "inspect_upload"]

_SNIFF_BYTES = 2048

_KNOWN_OTHER_TYPES = [
    (b"\xd0\xcf\x11\xe0", "a legacy Word or Office (.doc) file; save it as .docx"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"{\\rtf", "an RTF document; save it as .docx or PDF"),
]


def inspect_upload(stream: BinaryIO) -> Inspection:
    """Tell the kind of the file from its bytes and count (or estimate) its pages."""
    stream.seek(0)
    head = stream.read(_SNIFF_BYTES)
    stream.seek(0)
    if not head:
        raise InvalidUpload("The file is empty.", code="empty_file")
    for module in (pdf, docx):
        if module.matches(head):
            return module.inspect(stream)
    raise UnsupportedFileType(
        f"Only PDF and Word (.docx) files are supported; this file is {_describe(head)}."
    )


def extract(kind: str, data: bytes, *, on_page: OnPage | None = None) -> Extracted:
    """The text and real page count of a document of `kind` (UnreadableDocument if not)."""
    if kind == pdf.KIND:
        return pdf.extract(data, on_page=on_page)
    return docx.extract(data)


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
