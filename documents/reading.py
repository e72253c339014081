"""The limits for reading files, and the accept path's inspection of an upload in a
bounded child process: the Django side of `formats`, which reads no settings and is
given its limits by the functions here.

The inspection runs in a child process (core.isolation) under a wall clock of
INSPECT_SECONDS and a memory limit: the format modules bound their own work, and the
child bounds whatever they did not foresee.
"""

import math
from typing import BinaryIO

from django.conf import settings

from core.errors import UnreadableDocument
from core.isolation import ChildFailed, LimitExceeded, Limits, run_isolated
from formats import inspect_file, recognise
from formats.base import AcceptLimits, ExtractLimits, Inspection, too_slow

# DOCX: how many words make one estimated page when the file does not say.
DOCX_WORDS_PER_PAGE = 500
# DOCX: a page is charged for each this many bytes of the XML extraction parses, if that
# is more than its words make: Word writes 100 to 400 bytes of markup a word (some 50 to
# 200 KB a page), and parsing 1 MiB of it costs about 0.3 s of CPU.
DOCX_MARKUP_BYTES_PER_PAGE = 1024 * 1024
# DOCX: refuse archives that inflate beyond this (zip bombs), or whose parts extraction
# parses inflate more than this many times their stored size (Word's compress 5 to 15
# times; a megabyte of empty paragraphs, some 700 times).
DOCX_MAX_UNCOMPRESSED_BYTES = 200 * 1024 * 1024
DOCX_MAX_COMPRESSION_RATIO = 100
# DOCX at accept: how much of the body's XML is read to count words (the rest is
# extrapolated), and the time the whole inspection of one upload may take.
DOCX_XML_BUDGET_BYTES = 8 * 1024 * 1024
INSPECT_SECONDS = 1.0
# The inspection runs in a child process with this much memory (address space); one child
# inspects this many files, one after another, before a new one takes over.
INSPECT_MEMORY_MB = 512
INSPECT_CHILD_FILES = 100
# PDF: refuse a file whose cross-reference sections list more objects than this, counted
# from their headers before a single entry is read.
PDF_MAX_OBJECTS = 500_000
# A document with more text than this on one page fails.
MAX_CHARS_PER_PAGE = 200_000


def accept_limits() -> AcceptLimits:
    """What the accept path's inspection of one upload may do."""
    return AcceptLimits(
        max_pages=settings.PAPERLANE_MAX_PAGES_PER_DOCUMENT,
        docx_words_per_page=DOCX_WORDS_PER_PAGE,
        docx_markup_bytes_per_page=DOCX_MARKUP_BYTES_PER_PAGE,
        docx_max_uncompressed_bytes=DOCX_MAX_UNCOMPRESSED_BYTES,
        docx_max_compression_ratio=DOCX_MAX_COMPRESSION_RATIO,
        docx_xml_budget_bytes=DOCX_XML_BUDGET_BYTES,
        seconds=INSPECT_SECONDS,
        pdf_max_objects=PDF_MAX_OBJECTS,
    )


def extract_limits() -> ExtractLimits:
    """What the text extracted from one document may be."""
    return ExtractLimits(
        max_pages=settings.PAPERLANE_MAX_PAGES_PER_DOCUMENT,
        max_chars_per_page=MAX_CHARS_PER_PAGE,
        max_chars=settings.PAPERLANE_MAX_CHARS_PER_DOCUMENT,
        docx_words_per_page=DOCX_WORDS_PER_PAGE,
        docx_markup_bytes_per_page=DOCX_MARKUP_BYTES_PER_PAGE,
    )


def inspection_limits() -> Limits:
    """The inspection child's limits: the accept budget on the wall clock (and the CPU
    that fits in it), INSPECT_MEMORY_MB of address space."""
    seconds = INSPECT_SECONDS
    return Limits(
        memory_bytes=INSPECT_MEMORY_MB * 1024 * 1024,
        cpu_seconds=max(math.ceil(seconds), 1),
        wall_seconds=seconds,
    )


def inspect_upload(stream: BinaryIO) -> Inspection:
    """Tell the kind of the file from its bytes and count (or estimate) its pages,
    within INSPECT_SECONDS whatever the file: UnreadableDocument (422)
    for one that cannot be checked within it, or within the child's memory."""
    limits = accept_limits()
    return _inspect_isolated(recognise(stream), stream, limits)


def _inspect_isolated(kind: str, stream: BinaryIO, limits: AcceptLimits) -> Inspection:
    try:
        return run_isolated(
            inspect_file,
            kind,
            limits,
            file=stream,
            limits=inspection_limits(),
            reuse=INSPECT_CHILD_FILES,
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
