"""File formats, one module each (`pdf`, `docx`, and `image` for PNG, JPEG and TIFF):
what the accept path needs (recognise the file by its bytes, count or estimate its
pages without reading its text, within a time budget) and what the extract stage needs (clean text
and the real page count, within limits). The rules a format has (passwords,
page limits, page estimates) are written once, in its module; `base` holds
what they share.

No Django and no app here: the limits come in as arguments, built from the
settings by documents.reading, which also runs the accept path's inspection in a
bounded child process (core.isolation). So these modules load, and run, in a
child that has nothing else.
"""

import io
from typing import BinaryIO

from core.errors import InvalidUpload, UnsupportedFileType
from formats import docx, image, pdf
from formats.base import (
    SUPPORTED,
    AcceptLimits,
    Deadline,
    DeadlinePassed,
    Extracted,
    ExtractLimits,
    Inspection,
    OnPage,
    PagesOverBudget,
)

__all__ = [
    "AcceptLimits",
    "DeadlinePassed",
    "Extracted",
    "ExtractLimits",
    "Inspection",
    "PagesOverBudget",
    "extract",
    "inspect_file",
    "recognise",
]

_SNIFF_BYTES = 2048

_KNOWN_OTHER_TYPES = [
    (b"\xd0\xcf\x11\xe0", "a legacy Word or Office (.doc) file; save it as .docx"),
    (b"GIF8", "a GIF image; save it as PNG"),
    (b"RIFF", "a WebP image or other RIFF file; save it as PNG or JPEG"),
    (b"II+\x00", "a BigTIFF image; save it as TIFF, PNG or a PDF"),
    (b"{\\rtf", "an RTF document; save it as .docx or PDF"),
]


def recognise(stream: BinaryIO) -> str:
    """The kind of the file (PDF, DOCX, PNG, JPEG or TIFF) told from its first bytes, the
    stream left at its start: InvalidUpload if it is empty, UnsupportedFileType naming
    what it seems to be if it is of another kind."""
    stream.seek(0)
    head = stream.read(_SNIFF_BYTES)
    stream.seek(0)
    if not head:
        raise InvalidUpload("The file is empty.", code="empty_file")
    for module in (pdf, docx):
        if module.matches(head):
            return module.KIND
    if kind := image.kind_of(head):
        return kind
    raise UnsupportedFileType(f"{SUPPORTED}; this file is {_describe(head)}.")



def inspect_file(kind: str, limits: AcceptLimits, *, file: BinaryIO, progress) -> Inspection:
    """The pages of a file of `kind` as the accept path counts (or estimates) them, within
    `limits.seconds` (DeadlinePassed after): `file` is the upload, read from its start.
    Called in the inspection's child (documents.reading), which passes `progress`."""
    deadline = Deadline(limits.seconds)
    if kind in image.KINDS:
        return image.inspect(file, kind=kind, limits=limits, deadline=deadline)
    module = pdf if kind == pdf.KIND else docx
    return module.inspect(file, limits=limits, deadline=deadline)


def extract(
    kind: str,
    data: bytes,
    limits: ExtractLimits,
    *,
    progress: OnPage | None = None,
    page_budget: int | None = None,
) -> Extracted:
    """The clean text and real page count of a document of `kind` (UnreadableDocument if
    it cannot be read or is over a limit; PagesOverBudget as soon as its pages counted
    pass `page_budget`). Reads no settings: safe in a child process."""
    if kind == pdf.KIND:
        return pdf.extract(data, limits=limits, on_page=progress, page_budget=page_budget)
    if kind in image.KINDS:
        return image.extract(io.BytesIO(data), kind=kind, limits=limits, page_budget=page_budget)
    return docx.extract(data, limits=limits, page_budget=page_budget)


def _describe(head: bytes) -> str:
    for magic, description in _KNOWN_OTHER_TYPES:
        if head.startswith(magic):
            return description
    if head[4:12] in (b"ftypheic", b"ftypheix", b"ftypmif1", b"ftyphevc"):
        return "a HEIC photo; save it as JPEG (most phones can, in their camera settings)"
    text = head.lstrip().lower()
    if text.startswith((b"<!doctype html", b"<html", b"<head", b"<body")):
        return "an HTML page"
    if text.startswith(b"<?xml") or text.startswith(b"<"):
        return "XML or markup"
    return "of an unrecognised type"
