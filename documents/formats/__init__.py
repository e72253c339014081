"""File formats, one module each (`pdf`, `docx`): what the accept path needs
(recognise the file by its bytes, count or estimate its pages without reading
its text, within a time budget) and what the extract stage needs (clean text
and the real page count, within limits). The rules a format has (passwords,
page limits, page estimates) are written once, in its module; `base` holds
what they share. The format modules read no settings: the limits are built
here from them and passed in.

The accept path's inspection runs in a child process (core.isolation) under a
wall clock of PAPERLANE_ACCEPT_INSPECT_SECONDS and a memory limit: the format
modules bound their own work, and the child bounds whatever they did not foresee.
"""

import math
from typing import BinaryIO

from django.conf import settings

from core.errors import InvalidUpload, UnreadableDocument, UnsupportedFileType
from core.isolation import ChildFailed, LimitExceeded, Limits, run_isolated
from documents.formats import docx, pdf
from documents.formats.base import (
    AcceptLimits,
    Deadline,
    Extracted,
    ExtractLimits,
    Inspection,
    OnPage,
    PagesOverBudget,
    too_slow,
)

__all__ = [
    "Extracted",
    "ExtractLimits",
    "Inspection",
    "PagesOverBudget",
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
        pdf_max_objects=settings.PAPERLANE_PDF_MAX_OBJECTS,
    )


def extract_limits() -> ExtractLimits:
    return ExtractLimits(
        max_pages=settings.PAPERLANE_MAX_PAGES_PER_DOCUMENT,
        max_chars_per_page=settings.PAPERLANE_MAX_CHARS_PER_PAGE,
        max_chars=settings.PAPERLANE_MAX_CHARS_PER_DOCUMENT,
        docx_words_per_page=settings.PAPERLANE_DOCX_WORDS_PER_PAGE,
    )


def inspection_limits() -> Limits:
    """The inspection child's limits: the accept budget on the wall clock (and the CPU
    that fits in it), PAPERLANE_ACCEPT_INSPECT_MEMORY_MB of address space."""
    seconds = settings.PAPERLANE_ACCEPT_INSPECT_SECONDS
    return Limits(
        memory_bytes=settings.PAPERLANE_ACCEPT_INSPECT_MEMORY_MB * 1024 * 1024,
        cpu_seconds=max(math.ceil(seconds), 1),
        wall_seconds=seconds,
    )


def inspect_upload(stream: BinaryIO) -> Inspection:
    """Tell the kind of the file from its bytes and count (or estimate) its pages,
    within PAPERLANE_ACCEPT_INSPECT_SECONDS whatever the file: UnreadableDocument (422)
    for one that cannot be checked within it, or within the child's memory."""
    limits = accept_limits()
    stream.seek(0)
    head = stream.read(_SNIFF_BYTES)
    stream.seek(0)
    if not head:
        raise InvalidUpload("The file is empty.", code="empty_file")
    for module in (pdf, docx):
        if module.matches(head):
            return _inspect_isolated(module.KIND, stream, limits)
    raise UnsupportedFileType(
        f"Only PDF and Word (.docx) files are supported; this file is {_describe(head)}."
    )


def _inspect_isolated(kind: str, stream: BinaryIO, limits: AcceptLimits) -> Inspection:
    try:
        return run_isolated(
            inspect_file,
            kind,
            limits,
            file=stream,
            limits=inspection_limits(),
            reuse=settings.PAPERLANE_ACCEPT_INSPECT_CHILD_FILES,
        )
    except LimitExceeded as exc:
        if exc.limit != "memory":
            raise too_slow(limits.seconds) from exc
        raise UnreadableDocument(
            "The file needs more memory to check than one upload may use; it is too complex "
            "to accept. Saving it again from its application may help.",
            code="inspection_too_large",
        ) from exc
    except ChildFailed as exc:
        if exc.exitcode is None:  # no child to read the file: not the file's fault
            raise
        raise UnreadableDocument(
            "The file could not be checked: reading it failed. It may be damaged; saving "
            "it again from its application may help.",
            code="inspection_failed",
        ) from exc
    finally:
        stream.seek(0)


def inspect_file(kind: str, limits: AcceptLimits, *, file: BinaryIO, progress) -> Inspection:
    """The inspection itself, in the child: `file` is the upload, read from its start."""
    module = pdf if kind == pdf.KIND else docx
    return module.inspect(file, limits=limits, deadline=Deadline(limits.seconds))


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
    return docx.extract(data, limits=limits, page_budget=page_budget)


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
