"""PDF: recognise and count pages at accept (pypdf); text and the real page count at
extract (PDFium, pypdf for the files PDFium cannot open).

At accept only the strict parser runs: it reads the cross-reference sections and
the page tree's root, nothing else. A file it refuses (a damaged
cross-reference table, say) is not repaired in the request: its pages are
estimated from the page objects in its bytes, and the extract stage repairs
and counts it. pypdf's strict mode still repairs some damage itself (it
rebuilds a broken cross-reference table by inflating every object stream in
the file, searches every object for a catalog the trailer does not point
to, and the whole file for an object that is not where the table says): at
accept all three are turned off. Its work is bounded before it is done: the
cross-reference sections are read lazily (their headers and trailers only; an
entry is read when the object it locates is, so a file listing 500,000 objects
costs what one listing five does), the entries they list are counted from their
headers and bounded, a cross-reference stream may inflate only to the rows it
declares, the sections and the objects of an object stream are counted before
they are read, and every other stream it inflates is capped. Padding after the
end-of-file marker is cut off before pypdf looks for it. A file
over one of these bounds is refused as too complex; the accept path also runs
this in a child process under a wall clock (documents.reading). The page
tree's /Count is what the file states; extraction counts the pages there
really are, and that is what is charged.
"""

import contextlib
import ctypes
import io
import logging
import zlib
from typing import BinaryIO

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from pypdf import PdfReader, apply_configuration
from pypdf.errors import PdfReadError
from pypdf.generic import IndirectObject, StreamObject, read_object

from core.errors import UnreadableDocument, caused_by
from formats.base import (
    MAX_OUTLINE_ENTRIES,
    MAX_TITLE_CHARS,
    PAGE_BREAK,
    PDF,
    PDFIUM,
    PYPDF,
    AcceptLimits,
    Deadline,
    DeadlinePassed,
    Extracted,
    ExtractLimits,
    Heading,
    Inspection,
    OnPage,
    check_page_budget,
    check_page_count,
    clean_extracted,
    too_complex,
    too_much_text,
)

logger = logging.getLogger(__name__)

KIND = PDF
# Some producers put junk before the header; readers accept it within 1 KiB.
HEADER_WINDOW = 1024
_TRAILER_WINDOW = 2048
_SCAN_BLOCK = 1024 * 1024
_PADDING = b"\x00\t\n\f\r "
# Cross-reference sections (one per save of the file) read at accept: a file saved
# incrementally more often than this is refused, whatever each section holds.
MAX_XREF_SECTIONS = 1000
# Objects of one object stream: pypdf parses all of them to read one (about 60 us each).
# Producers write 100 to 500.
MAX_OBJECT_STREAM_OBJECTS = 5000
# What an object stream read at accept may inflate to (producers' are tens of KB): pypdf
# reads what follows an object a byte at a time in Python, padding included.
_OBJECT_STREAM_BYTES = 1024 * 1024
# A cross-reference table's entries are 20 bytes each (PDF 32000-1, 7.5.4).
_TABLE_ENTRY = 20
_WHITESPACE = b"\x00\t\n\f\r "
# At accept pypdf inflates the cross-reference stream and the object streams holding
# the catalog and the page tree's root, nothing else: far below these caps.
_ACCEPT_STREAM_BYTES = 16 * 1024 * 1024
_OUTPUT_CAPS = (
    "zlib_maximum_output_length",
    "lzw_maximum_output_length",
    "run_length_maximum_output_length",
    "brotli_maximum_output_length",
    "array_based_stream_maximum_output_length",
)
_ACCEPT_LIMITS = {
    name: _ACCEPT_STREAM_BYTES
    for name in (
        "maximum_declared_stream_length",
        "stream_decoding_work_maximum_length",
        *_OUTPUT_CAPS,
    )
}
# Beyond its rows a cross-reference stream may hold a PNG predictor's byte per row.
_XREF_STREAM_SLACK = 4096


def _encrypted() -> UnreadableDocument:
    return UnreadableDocument(
        "The PDF is protected by a password. Save it without the password, then upload it "
        "again (or, in a connected folder, put it back in its folder).",
        code="encrypted_pdf",
    )


def _damaged(detail: str = "could not be read") -> UnreadableDocument:
    return UnreadableDocument(
        f"The PDF {detail}; the file appears to be damaged.", code="damaged_pdf"
    )


def matches(head: bytes) -> bool:
    return b"%PDF-" in head[:HEADER_WINDOW]


class _Refused(BaseException):  # noqa: N818 - not an error of pypdf's: a way out of it
    """Raised inside pypdf to stop it at once with `error`. Not an Exception, so that
    none of pypdf's `except Exception` handlers takes it for damage to work around."""

    def __init__(self, error: UnreadableDocument) -> None:
        super().__init__(error.message)
        self.error = error


class _Entries:
    """The entries of one cross-reference section, read one at a time when asked for:
    `subsections` are (first object, count, where its first entry starts), in `data` (a
    cross-reference stream's rows, `widths` wide) or in the file (a table's 20-byte lines)."""

    def __init__(self, subsections, *, data: bytes | None = None, widths=()) -> None:
        self.subsections, self.data, self.widths = subsections, data, tuple(widths)

    def find(self, stream: BinaryIO, number: int) -> tuple[int, int, int] | None:
        """(type, field 2, field 3) of `number`'s entry as the stream's rows write them (a
        table's `n` line is type 1 with its offset and generation, `f` type 0); None if
        this section does not list it."""
        for first, count, at in self.subsections:
            if first <= number < first + count:
                index = number - first
                return self._row(at, index) if self.data is not None else _table_entry(
                    stream, at + index * _TABLE_ENTRY
                )
        return None

    def _row(self, at: int, index: int) -> tuple[int, int, int]:
        start = at + index * sum(self.widths)
        fields = []
        for position, width in enumerate(self.widths):
            if width:
                fields.append(int.from_bytes(self.data[start : start + width], "big"))
            else:  # a field of width 0 has its default: type 1, else 0
                fields.append(1 if position == 0 else 0)
            start += width
        return fields[0], fields[1], fields[2]


def _table_entry(stream: BinaryIO, at: int) -> tuple[int, int, int]:
    stream.seek(at)
    line = stream.read(_TABLE_ENTRY)
    offset, generation, kind = line[:10], line[11:16], line[17:18]
    if not (
        len(line) == _TABLE_ENTRY
        and line[10:11] == line[16:17] == b" "
        and offset.isdigit()
        and generation.isdigit()
        and kind in (b"n", b"f")
    ):
        raise PdfReadError(f"the cross-reference entry at {at} is damaged")
    return (1 if kind == b"n" else 0), int(offset), int(generation)


def _skip_whitespace(stream: BinaryIO) -> bytes:
    """Past whitespace and comments; the next byte, left unread."""
    while True:
        byte = stream.read(1)
        if byte == b"%":
            while byte not in (b"\n", b"\r", b""):
                byte = stream.read(1)
        elif byte == b"" or byte not in _WHITESPACE:
            if byte:
                stream.seek(-1, 1)
            return byte


class _AcceptReader(PdfReader):
    """pypdf's strict reader without the repairs strict mode still makes (a file that
    needs one is refused, to be estimated instead), reading the cross-reference lazily
    and with its work counted before it is done: the entries and sections of the
    cross-reference, the objects of an object stream. Over `max_objects` entries or one
    of the bounds above, it stops (_Refused)."""

    def __init__(self, stream: BinaryIO, *, max_objects: int, deadline: Deadline) -> None:
        self._max_objects = max_objects
        self._deadline = deadline
        self._listed = 0
        self._sections: list[_Entries] = []  # newest first, as pypdf reads them
        self._looked_up: set[int] = set()
        super().__init__(
            stream,
            strict=True,
            root_object_recovery_limit=0,
            xref_stream_maximum_entries=max_objects,
        )

    def _rebuild_xref_table(self, stream) -> None:
        raise PdfReadError("the cross-reference table needs repair")

    def _section(self) -> None:
        if len(self._sections) >= MAX_XREF_SECTIONS:
            raise _Refused(
                too_complex(
                    f"it was saved over itself more than {MAX_XREF_SECTIONS:,} times "
                    "(cross-reference sections)"
                )
            )
        self._check_time()

    def _list(self, entries: int) -> None:
        self._listed += entries
        if self._listed > self._max_objects:
            raise _Refused(
                too_complex(
                    f"it lists {self._listed:,} objects or more; the most we accept is "
                    f"{self._max_objects:,}"
                )
            )

    def _check_time(self) -> None:
        try:
            self._deadline.check()
        except DeadlinePassed as exc:
            raise _Refused(exc) from None

    def _read_standard_xref_table(self, stream) -> None:
        # After "x": "ref", then subsections, each a header ("first count") and its
        # 20-byte entries, which are skipped here; the stream is left after "trailer".
        self._section()
        if stream.read(3) != b"ref":
            raise PdfReadError("xref table read error")
        subsections = []
        while True:
            _skip_whitespace(stream)
            if stream.read(7) == b"trailer":
                break
            stream.seek(-7, 1)
            first = read_object(stream, self)
            _skip_whitespace(stream)
            count = self._read_standard_xref_table__handle_size(stream)
            if count is None:  # pypdf would rebuild the table
                raise PdfReadError("a cross-reference subsection header is damaged")
            if not isinstance(first, int) or first < 0 or not isinstance(count, int):
                raise PdfReadError("a cross-reference subsection header is damaged")
            _skip_whitespace(stream)
            subsections.append((first, count, stream.tell()))
            stream.seek(count * _TABLE_ENTRY, 1)
        self._sections.append(_Entries(subsections))

    def _read_standard_xref_table__handle_size(self, stream):
        # Each subsection's size, read from its header before its entries.
        size = super()._read_standard_xref_table__handle_size(stream)
        if isinstance(size, int):
            self._list(size)
        return size

    def _read_pdf15_xref_stream(self, stream) -> StreamObject:
        # Its dictionary and its rows, inflated (within the bound set below) but not read:
        # an entry is read when the object it locates is.
        self._section()
        stream.seek(-1, 1)
        number, generation = self.read_object_header(stream)
        xref_stream = read_object(stream, self)
        if not isinstance(xref_stream, StreamObject) or xref_stream.get("/Type") != "/XRef":
            raise PdfReadError("the cross-reference stream is not one")
        self.cache_indirect_object(generation, number, xref_stream)
        size = xref_stream.get("/Size")
        widths = xref_stream.get("/W")
        if not isinstance(size, int) or not isinstance(widths, list) or len(widths) != 3:
            raise PdfReadError("the cross-reference stream's /Size or /W is damaged")
        pairs = self._sanitize_pdf15_xref_stream_index_pairs(
            index_pairs=xref_stream.get("/Index", [0, size]),
            entry_sizes=widths,
            xref_stream=xref_stream,
        )
        data = xref_stream.get_data()
        row = sum(int(width) for width in widths)
        subsections, rows = [], 0
        for first, count in zip(pairs[0::2], pairs[1::2], strict=True):
            if not isinstance(first, int) or first < 0:
                raise PdfReadError("a cross-reference stream subsection is damaged")
            subsections.append((first, count, rows * row))
            rows += count
        if rows * row > len(data):
            raise PdfReadError("the cross-reference stream is shorter than its rows")
        self._sections.append(_Entries(subsections, data=bytes(data), widths=widths))
        return xref_stream

    def _sanitize_pdf15_xref_stream_index_pairs(self, index_pairs, entry_sizes, xref_stream):
        # Called with the stream's dictionary before its data is inflated: the entries it
        # declares are counted, and it may inflate to its rows and no further.
        widths = [int(width) for width in entry_sizes]
        counts = index_pairs[1::2]
        if len(widths) != 3 or not all(0 <= width <= 8 for width in widths):
            raise PdfReadError(f"cross-reference stream widths {widths}")
        if not all(isinstance(count, int) and count >= 0 for count in counts):
            raise PdfReadError("cross-reference stream subsections are not counts")
        entries = sum(counts)
        self._list(entries)
        inflated = min(entries * (sum(widths) + 1) + _XREF_STREAM_SLACK, _ACCEPT_STREAM_BYTES)
        with apply_configuration(**dict.fromkeys(_OUTPUT_CAPS, inflated)):
            pairs = super()._sanitize_pdf15_xref_stream_index_pairs(
                index_pairs, entry_sizes, xref_stream
            )
            # Inflated here, under the same cap, for the rows read later.
            xref_stream.get_data()
        return pairs

    def _get_object_from_stream(self, indirect_reference):
        stream_number = self.xref_objStm[indirect_reference.idnum][0]
        self._look_up(stream_number, 0)
        if stream_number in self.xref_objStm:
            raise PdfReadError("an object stream inside an object stream")
        objects = IndirectObject(stream_number, 0, self).get_object().get("/N")
        if isinstance(objects, int) and objects > MAX_OBJECT_STREAM_OBJECTS:
            raise _Refused(
                too_complex(
                    f"one of its object streams holds {objects:,} objects; the most we read "
                    f"is {MAX_OBJECT_STREAM_OBJECTS:,}"
                )
            )
        self._check_time()
        with apply_configuration(**dict.fromkeys(_OUTPUT_CAPS, _OBJECT_STREAM_BYTES)):
            return super()._get_object_from_stream(indirect_reference)

    def _look_up(self, number: int, generation: int) -> None:
        """Where object `number` is, from the newest section that lists it, put where
        pypdf looks (its xref tables); nothing for a free or unlisted object."""
        if number in self._looked_up:
            return
        self._looked_up.add(number)
        for section in self._sections:
            entry = section.find(self.stream, number)
            if entry is None:
                continue
            kind, first, second = entry
            if kind == 1:
                self.xref.setdefault(second, {})[number] = first
            elif kind == 2:
                self.xref_objStm[number] = (first, second)
            return

    def get_object(self, indirect_reference):
        # pypdf searches the whole file for an object that is not where the table says;
        # here that is damage, estimated instead.
        if isinstance(indirect_reference, int):
            indirect_reference = IndirectObject(indirect_reference, 0, self)
        number, generation = indirect_reference.idnum, indirect_reference.generation
        self._look_up(number, generation)
        offset = self.xref.get(generation, {}).get(number)
        if (
            offset is not None
            and (generation, number) not in self.resolved_objects
            and not (generation == 0 and number in self.xref_objStm)
        ):
            self.stream.seek(offset, 0)
            if self.read_object_header(self.stream) != (number, generation):
                raise PdfReadError(f"object {number} is not where the table says")
        return super().get_object(indirect_reference)


# The reader above bounds pypdf by overriding its own methods: a pypdf that renamed one
# would leave that bound silently unapplied, so importing fails instead.
_HOOKED = [
    name
    for name, value in vars(_AcceptReader).items()
    if callable(value)
    and name.startswith("_")
    and not name.startswith("__")
    and name not in {"_section", "_list", "_check_time", "_look_up"}
]
if missing := [name for name in _HOOKED if not callable(getattr(PdfReader, name, None))]:
    raise ImportError(f"pypdf no longer has {', '.join(missing)}: update _AcceptReader")


def _decrypted(reader: PdfReader) -> PdfReader:
    if reader.is_encrypted and not reader.decrypt(""):
        raise _encrypted()
    return reader


def _stated_pages(stream: BinaryIO, *, limits: AcceptLimits, deadline: Deadline) -> object:
    """The page tree's /Count, read the strict way with its work bounded; raises whatever
    pypdf raises for a file that needs repair, UnreadableDocument for one over a bound."""
    try:
        with apply_configuration(**_ACCEPT_LIMITS):
            reader = _AcceptReader(stream, max_objects=limits.pdf_max_objects, deadline=deadline)
            return _decrypted(reader).root_object["/Pages"]["/Count"]
    except _Refused as refused:
        raise refused.error from None


def inspect(stream: BinaryIO, *, limits: AcceptLimits, deadline: Deadline) -> Inspection:
    """The page count the file states, without walking its pages or repairing it."""
    end, tail = _tail(stream, deadline)
    if b"%%EOF" not in tail:
        raise UnreadableDocument(
            "The PDF is incomplete (it has no end-of-file marker); it may have been cut off "
            "during transfer. Please upload the whole file again.",
            code="truncated_pdf",
        )
    try:
        # pypdf looks for the end-of-file marker a line at a time from the end: padding
        # (megabytes of NULs make one long line) is cut off first.
        unpadded = _Window(stream, end)
        pages, estimated = _stated_pages(unpadded, limits=limits, deadline=deadline), False
    except UnreadableDocument:
        raise
    except Exception as exc:  # pypdf raises many types for what strict mode refuses
        if caused_by(exc, MemoryError):
            raise  # the inspection's memory limit (pypdf wraps some), not damage
        logger.info("PDF needs repair; estimating its pages at accept: %s", exc)
        pages, estimated = _count_page_objects(stream, deadline), True
    finally:
        stream.seek(0)
    deadline.check()
    pages = check_page_count(pages, limit=limits.max_pages, what="PDF")
    return Inspection(kind=KIND, pages=pages, estimated=estimated)


def _tail(stream: BinaryIO, deadline: Deadline) -> tuple[int, bytes]:
    """Where the file ends before any padding (NULs and whitespace, as some producers
    and transfers append), and its last bytes there, where the end-of-file marker
    belongs. Linear in the padding, read backwards in blocks."""
    end = stream.seek(0, 2)
    block = _TRAILER_WINDOW  # enough for nearly every file, whose end is not padded
    while end > 0:
        start = max(end - block, 0)
        stream.seek(start)
        kept = stream.read(end - start).rstrip(_PADDING)
        if kept:
            end = start + len(kept)
            break
        end, block = start, _SCAN_BLOCK
        deadline.check()
    stream.seek(max(end - _TRAILER_WINDOW, 0))
    tail = stream.read(min(end, _TRAILER_WINDOW))
    stream.seek(0)
    return end, tail


class _Window(io.RawIOBase):
    """The first `end` bytes of `stream`, as a stream of their own."""

    def __init__(self, stream: BinaryIO, end: int) -> None:
        super().__init__()
        self._stream, self._end, self._at = stream, end, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        at = offset + (0, self._at, self._end)[whence]
        if at < 0:
            raise ValueError(f"negative seek position {at}")
        self._at = at
        return at

    def readinto(self, buffer) -> int:
        wanted = max(0, min(len(buffer), self._end - self._at))
        self._stream.seek(self._at)
        data = self._stream.read(wanted)
        buffer[: len(data)] = data
        self._at += len(data)
        return len(data)


# "/Type /Page" (not "/Pages") marks a page object. Compressed object streams
# (/ObjStm) hide them: then the count is only known to be at least one.
_PAGE_MARKERS = (b"/Type/Page", b"/Type /Page")
_OBJECT_STREAM = b"/ObjStm"


def _count_page_objects(stream: BinaryIO, deadline: Deadline) -> int:
    """Page objects in the raw bytes: fixed-string counts over blocks, linear in the size.
    A file with none, and no compressed objects that could hold them, is damaged."""
    patterns = [(marker, +1) for marker in _PAGE_MARKERS] + [
        (marker + b"s", -1) for marker in _PAGE_MARKERS
    ]
    hidden = 0
    keep = max(len(pattern) for pattern, _ in patterns) - 1
    stream.seek(0)
    count, carry = 0, b""
    while True:
        block = stream.read(_SCAN_BLOCK)
        data = carry + block
        # Count what starts before `decided`; the tail may begin a marker the next
        # block completes, so it is kept and counted then.
        decided = len(data) - keep if block else len(data)
        for pattern, sign in patterns:
            count += sign * data[: max(decided, 0) + len(pattern) - 1].count(pattern)
        hidden += data[: max(decided, 0) + len(_OBJECT_STREAM) - 1].count(_OBJECT_STREAM)
        if not block:
            if count < 1 and not hidden:
                raise _damaged("'s pages could not be found")
            return max(count, 1)
        carry = data[max(decided, 0) :]
        deadline.check()


# Form fields whose value is text a reader sees: text fields, combo boxes and lists
# (a check box's value is "Off" or "Yes").
_TEXT_FIELDS = (
    pdfium_c.FPDF_FORMFIELD_TEXTFIELD,
    pdfium_c.FPDF_FORMFIELD_COMBOBOX,
    pdfium_c.FPDF_FORMFIELD_LISTBOX,
)
MAX_OUTLINE_DEPTH = 12


class _Pages:
    """The text of a document's pages as they are read, in order, within the limits:
    where each starts, which hold no text and which could not be read."""

    def __init__(self, total: int, *, limits: ExtractLimits, on_page: OnPage | None) -> None:
        self.total, self.limits, self.on_page = total, limits, on_page
        self.texts: list[str] = []
        self.starts: list[int] = []
        self.textless: list[int] = []
        self.unreadable: list[int] = []
        self.chars = self._offset = 0

    def add(self, text: str | None) -> None:
        """The next page's raw text, None for a page that could not be read."""
        number = len(self.texts) + 1
        if text is None:
            self.unreadable.append(number)
            text = ""
        else:
            text = clean_extracted(text).strip()
            if not text:
                self.textless.append(number)
        if len(text) > self.limits.max_chars_per_page:
            raise too_much_text(f"Page {number}", self.limits.max_chars_per_page)
        self.chars += len(text)
        if self.chars > self.limits.max_chars:
            raise too_much_text("The document", self.limits.max_chars)
        self.starts.append(self._offset)
        self._offset += len(text) + len(_PAGE_BREAK)
        self.texts.append(text)
        if self.on_page is not None:
            self.on_page(number, self.total)

    def extracted(self, *, engine: str, outline: tuple[Heading, ...] = ()) -> Extracted:
        if len(self.unreadable) == self.total:
            raise _damaged("'s pages could not be read")
        return Extracted(
            text=_PAGE_BREAK.join(self.texts),
            page_count=self.total,
            unreadable_pages=tuple(self.unreadable),
            textless_pages=tuple(self.textless),
            page_starts=tuple(self.starts),
            outline=outline,
            engine=engine,
        )


_PAGE_BREAK = PAGE_BREAK


def _counted(total: int, *, limits: ExtractLimits, page_budget: int | None) -> None:
    if total < 1:
        raise _damaged("'s pages could not be found")
    check_page_count(total, limit=limits.max_pages)
    check_page_budget(total, budget=page_budget, complete=True)


def extract(
    data: bytes,
    *,
    limits: ExtractLimits,
    on_page: OnPage | None = None,
    page_budget: int | None = None,
) -> Extracted:
    """Text of every page and the number of pages there really are (the page tree
    walked, whatever its /Count says), read by PDFium; a file PDFium cannot open (one
    it cannot repair, or one opened only by the empty owner password) is read by
    pypdf's tolerant parser. A page whose content cannot be read is left out and named,
    as a viewer shows the others; a file of which no page can be read is damaged.
    Pages are counted before any text is read: over `page_budget`, PagesOverBudget."""
    try:
        document = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        logger.info("PDFium could not open the PDF (%s); reading it with pypdf", exc)
        return read_with_pypdf(data, limits=limits, on_page=on_page, page_budget=page_budget)
    try:
        reader = _page_tree_disagrees(data, len(document))
        if reader is not None:
            return read_with_pypdf(
                data, limits=limits, on_page=on_page, page_budget=page_budget, reader=reader
            )
        return read_with_pdfium(document, limits=limits, on_page=on_page, page_budget=page_budget)
    finally:
        document.close()


def _page_tree_disagrees(data: bytes, counted: int) -> PdfReader | None:
    """pypdf's reader of the file if its page tree holds another number of pages than
    PDFium `counted`, else None. PDFium takes the count the page tree's root states (a
    file may state 1 and hold 40, or state 5000 and hold 1); the pages are what the tree
    holds, and pypdf walks it. The walk costs as much as PDFium's text on a small file,
    so where the page objects written in the file (`_page_objects`) are as many as
    PDFium counted, the count stands."""
    if _page_objects(data) == counted:
        return None
    try:
        reader = _decrypted(PdfReader(io.BytesIO(data), strict=False))
        leaves = len(reader.pages)
    except UnreadableDocument:  # a refusal (DeadlinePassed is one), not a tree to doubt
        raise
    except Exception:
        return None  # pypdf cannot walk it: PDFium's reading stands
    if leaves == counted:
        return None
    logger.warning(
        "the PDF's page tree holds %s pages, PDFium counted %s: read by pypdf", leaves, counted
    )
    return reader


# What the object streams of one file may inflate to for the count of its page objects;
# a file whose streams hold more is walked by pypdf instead.
_OBJECT_STREAMS_BYTES = 32 * 2**20
_STREAM_KEYWORD = b"stream"
# How far before a page object's marker its "N G obj" header is looked for.
_HEADER_REACH = 4096


def _page_objects(data: bytes) -> int | None:
    """Page objects (not page tree nodes) the file defines: in its bytes, each object
    number once (a file saved over itself writes a page again), and in its object
    streams that zlib inflates. None if an object stream cannot be inflated (another
    filter, encryption) or they hold more than _OBJECT_STREAMS_BYTES. A count in linear
    time, of fixed strings; where it errs the page tree is walked."""
    numbers = {_object_number(data, at) for at in _markers(data)}
    found, budget, at = len(numbers), _OBJECT_STREAMS_BYTES, data.find(_OBJECT_STREAM)
    while at != -1:
        inflated = _inflate_stream_after(data, at, budget)
        if inflated is None:
            return None
        budget -= len(inflated)
        found += sum(1 for _ in _markers(inflated))
        at = data.find(_OBJECT_STREAM, at + len(_OBJECT_STREAM))
    return found


def _markers(data: bytes):
    """Where a page object's /Type entry begins in `data`."""
    for marker in _PAGE_MARKERS:
        at = data.find(marker)
        while at != -1:
            end = at + len(marker)
            if data[end : end + 1] != b"s":
                yield at
            at = data.find(marker, end)


def _object_number(data: bytes, at: int) -> bytes | int:
    """The object number in the "N G obj" header before `at`, or `at` itself where no
    header is found (counted apart: never merged with another)."""
    header = data.rfind(b"obj", max(at - _HEADER_REACH, 0), at)
    words = data[max(header - 24, 0) : header].split()[-2:] if header != -1 else []
    if len(words) == 2 and words[0].isdigit() and words[1].isdigit():
        return words[0]
    return at


def _inflate_stream_after(data: bytes, at: int, budget: int) -> bytes | None:
    """The data of the first stream after `at`, inflated within `budget` bytes; None if
    it is not zlib data or inflates to more."""
    start = data.find(_STREAM_KEYWORD, at)
    if start == -1 or budget <= 0:  # (a max_length of 0 is no limit to zlib)
        return None
    start += len(_STREAM_KEYWORD)
    start += 2 if data[start : start + 2] == b"\r\n" else 1
    # To its end only: zlib copies the input after the data it inflates.
    end = data.find(b"endstream", start)
    inflater = zlib.decompressobj()
    try:
        inflated = inflater.decompress(
            memoryview(data)[start : len(data) if end == -1 else end], budget
        )
    except zlib.error:
        return None
    return inflated if inflater.eof else None


def read_with_pdfium(
    document: pdfium.PdfDocument,
    *,
    limits: ExtractLimits,
    on_page: OnPage | None = None,
    page_budget: int | None = None,
) -> Extracted:
    """Text of every page PDFium counts in `document`, the values of its form fields and
    its outline. A page PDFium cannot load is left out and named."""
    total = len(document)
    _counted(total, limits=limits, page_budget=page_budget)
    pages = _Pages(total, limits=limits, on_page=on_page)
    with _form_of(document) as form:
        for index in range(total):
            try:
                page = document[index]
            except pdfium.PdfiumError:
                pages.add(None)
                continue
            try:
                text = _page_text(page, form)
            except pdfium.PdfiumError:
                text = None
            finally:
                page.close()
            pages.add(text)
    return pages.extracted(engine=PDFIUM, outline=_outline(document))


@contextlib.contextmanager
def _form_of(document: pdfium.PdfDocument):
    """A handle on `document`'s interactive form, to read its fields' values (field values
    live in the form, not on the page), or None if it has none. Not the document's own
    form environment (init_forms): with that, each page loaded gets its widgets built
    for display, which text does not need and which costs up to half as much again."""
    if pdfium_c.FPDF_GetFormType(document.raw) == pdfium_c.FORMTYPE_NONE:
        yield None
        return
    config = pdfium_c.FPDF_FORMFILLINFO(version=2)
    form = pdfium_c.FPDFDOC_InitFormFillEnvironment(document.raw, config)
    try:
        yield form or None
    finally:
        if form:
            pdfium_c.FPDFDOC_ExitFormFillEnvironment(form)


def _page_text(page: pdfium.PdfPage, form) -> str:
    """What PDFium reads on the page (in reading order, with the spaces and line breaks
    it sees in the gaps between characters, a character printed twice over itself once),
    and the values of its form fields."""
    textpage = page.get_textpage()
    try:
        text = textpage.get_text_bounded()
    finally:
        textpage.close()
    return text if form is None else _with_field_values(text, page, form)


def _with_field_values(text: str, page: pdfium.PdfPage, form) -> str:
    """The page's text and the values of its form fields that it does not show already,
    one a line, in the order of the page's widgets."""
    values = []
    for index in range(pdfium_c.FPDFPage_GetAnnotCount(page.raw)):
        annotation = pdfium_c.FPDFPage_GetAnnot(page.raw, index)
        if not annotation:
            continue
        try:
            if pdfium_c.FPDFAnnot_GetSubtype(annotation) != pdfium_c.FPDF_ANNOT_WIDGET:
                continue
            if pdfium_c.FPDFAnnot_GetFormFieldType(form, annotation) not in _TEXT_FIELDS:
                continue
            size = pdfium_c.FPDFAnnot_GetFormFieldValue(form, annotation, None, 0)
            if size <= 2:  # the terminating NUL alone: no value
                continue
            buffer = ctypes.create_string_buffer(size)
            pointer = ctypes.cast(buffer, ctypes.POINTER(pdfium_c.FPDF_WCHAR))
            pdfium_c.FPDFAnnot_GetFormFieldValue(form, annotation, pointer, size)
            value = buffer.raw[: size - 2].decode("utf-16-le", errors="replace").strip()
        finally:
            pdfium_c.FPDFPage_CloseAnnot(annotation)
        if value and value not in text:
            values.append(value)
    return "\n".join([text, *values]) if values else text


def _outline(document: pdfium.PdfDocument) -> tuple[Heading, ...]:
    """The document's bookmarks, bounded (pypdfium2 stops at a cycle)."""
    headings = []
    try:
        for item in document.get_toc(max_depth=MAX_OUTLINE_DEPTH):
            title = " ".join(clean_extracted(item.get_title() or "").split())[:MAX_TITLE_CHARS]
            if title:
                destination = item.get_dest()
                index = destination.get_index() if destination else None
                page = index + 1 if index is not None and 0 <= index < len(document) else None
                headings.append(Heading(title=title, level=item.level, page=page))
            if len(headings) >= MAX_OUTLINE_ENTRIES:
                break
    except pdfium.PdfiumError:
        logger.info("the PDF's outline could not be read", exc_info=True)
    return tuple(headings)


def read_with_pypdf(
    data: bytes,
    *,
    limits: ExtractLimits,
    on_page: OnPage | None = None,
    page_budget: int | None = None,
    reader: PdfReader | None = None,
) -> Extracted:
    """The same, read by pypdf's tolerant parser, which repairs what it can (`reader`:
    one already open on `data`)."""
    try:
        reader = reader or _decrypted(PdfReader(io.BytesIO(data), strict=False))
        total = len(reader.pages)
    except UnreadableDocument:  # a refusal (DeadlinePassed is one), not damage
        raise
    except Exception as exc:
        raise _damaged() from exc
    _counted(total, limits=limits, page_budget=page_budget)
    pages, error = _Pages(total, limits=limits, on_page=on_page), None
    for page in reader.pages:
        try:
            text = page.extract_text() or ""
        except DeadlinePassed:  # the time is up, not this page damaged
            raise
        except Exception as exc:
            if caused_by(exc, MemoryError):
                raise  # the document's memory limit, which the stage judges
            text, error = None, exc
        pages.add(text)
    try:
        return pages.extracted(engine=PYPDF)
    except UnreadableDocument as exc:
        raise exc from error
