"""Crafted and awkward documents, built in memory, for tests of the ingestion pipeline.

Each function returns the file's bytes; sizes are parameters so a test that only needs to
prove a limit is applied can ask for a small one.
"""

import io
import random
import re
import struct
import zipfile
import zlib

from pypdf import PdfReader, PdfWriter
from pypdf.generic import NameObject

from tests.support.files import LOREM, make_docx, make_pdf, multipart_body, one_page_pdf

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_BYTES_PER_WORD = 7  # what make_pdf() spends per word of text, operators included


def pdf_with_nul_text(pages: int = 2) -> bytes:
    """Text that extracts with NUL and other C0 control characters, as some PDF optimisers
    and broken font encodings produce; such text cannot be stored in a PostgreSQL text column.
    """
    # Raw bytes in a literal string mean the same as \000-style escapes.
    return make_pdf(pages, words_per_page=40, label="Page\x00\x01\x07\x1b\x1f")


def pdf_with_nul_in_filter_name(*, trailer_root: bool = True) -> bytes:
    """A one-page PDF whose content stream names the filter `/Foo#00Bar`: pypdf refuses it
    with an error whose message holds a NUL, which a PostgreSQL text column refuses (PDFium
    reads the page as blank). Without `trailer_root` its trailer does not point to its
    catalog: PDFium refuses the file, and pypdf finds the catalog and reads on."""
    stream = b"BT /F1 11 Tf 72 740 Td (Hello) Tj ET"
    return one_page_pdf(
        stream, stream_keys=b" /Filter /Foo#00Bar", root=1 if trailer_root else None
    )


def docx_quadratic_text_runs(repeats: int = 24_000) -> bytes:
    """A tiny DOCX whose document.xml is `<w:t ` over and over, never closed: a regex such as
    rb"<w:t(?:\\s[^>]*)?>([^<]*)</w:t>" retries from every `<w:t` and runs to the end each time,
    so its time grows with the square of the size (about 20 s for the default, in 0.7 KB).
    """
    return zipped(
        {
            "[Content_Types].xml": _CONTENT_TYPES.encode(),
            "word/document.xml": b"<w:t " * repeats,
        }
    )


def pdf_with_broken_startxref(size_mb: int = 49) -> bytes:
    """A PDF of about `size_mb` MiB whose startxref points into a content stream, as left by
    tools that edit a file without rewriting its trailer: strict parsing refuses it and the
    tolerant parser rebuilds the cross-reference table by scanning every byte.
    """
    pages = 100
    data = make_pdf(pages, words_per_page=size_mb * 2**20 // (pages * _BYTES_PER_WORD))
    head, _, _ = data.rpartition(b"startxref\n")
    return head + b"startxref\n%d\n%%%%EOF\n" % (len(data) // 2)


def _pdf_head(version: bytes = b"1.5") -> tuple[io.BytesIO, dict[int, int]]:
    """A one-page PDF's catalog, page tree and page; the offsets of its objects."""
    out, offsets = io.BytesIO(), {}
    out.write(b"%PDF-" + version + b"\n")
    for number, body in (
        (1, b"<< /Type /Catalog /Pages 2 0 R >>"),
        (2, b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>"),
        (3, b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>"),
    ):
        offsets[number] = out.tell()
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    return out, offsets


def _object_stream(number: int, inflated: int, first_object: int = 0) -> bytes:
    """An object stream that inflates to `inflated` bytes (one object, then padding)."""
    head = b"%d 0 " % first_object
    data = zlib.compress((head + b"<< /A 1 >>").ljust(inflated), 9)
    return (
        b"%d 0 obj\n<< /Type /ObjStm /N 1 /First %d /Filter /FlateDecode /Length %d >>\n"
        b"stream\n%s\nendstream\nendobj\n" % (number, len(head), len(data), data)
    )


def pdf_needing_xref_rebuild(streams: int = 10, inflated: int = 10_000_000) -> bytes:
    """A small PDF whose cross-reference subsection has no integer size: even pypdf's
    strict reader then rebuilds the table, inflating every object stream in the file
    (`streams` of `inflated` bytes each: seconds of CPU from a few KB)."""
    out, _ = _pdf_head()
    for n in range(streams):
        out.write(_object_stream(10 + n, inflated))
    xref = out.tell()
    out.write(b"xref\n0 /Bogus\ntrailer\n<< /Size 4 /Root 1 0 R >>\n")
    out.write(b"startxref\n%d\n%%%%EOF\n" % xref)
    return out.getvalue()


def pdf_with_root_not_a_catalog(streams: int = 10, inflated: int = 10_000_000) -> bytes:
    """A PDF whose trailer's /Root is not a catalog, with `streams` objects each alone in
    an object stream inflating to `inflated` bytes: pypdf searches every object for a
    catalog, inflating (and keeping) each stream."""
    out, offsets = io.BytesIO(), {}
    out.write(b"%PDF-1.5\n")
    for k in range(1, streams + 1):
        offsets[1000 + k] = out.tell()
        out.write(_object_stream(1000 + k, inflated, first_object=k))
    xref_number = 1000 + streams + 1
    rows = [bytes([0]) + bytes(4) + (65535).to_bytes(2, "big")]
    for i in range(1, xref_number):
        if i <= streams:
            rows.append(bytes([2]) + (1000 + i).to_bytes(4, "big") + bytes(2))
        elif i in offsets:
            rows.append(bytes([1]) + offsets[i].to_bytes(4, "big") + bytes(2))
        else:
            rows.append(bytes(7))
    at = out.tell()
    rows.append(bytes([1]) + at.to_bytes(4, "big") + bytes(2))
    table = b"".join(rows)
    out.write(
        b"%d 0 obj\n<< /Type /XRef /Size %d /W [1 4 2] /Root 1 0 R /Length %d >>\nstream\n"
        % (xref_number, xref_number + 1, len(table))
    )
    out.write(table + b"\nendstream\nendobj\nstartxref\n%d\n%%%%EOF\n" % at)
    return out.getvalue()


def pdf_with_long_xref_table(entries: int = 1_000_000, *, damaged_unused: bool = False) -> bytes:
    """A one-page PDF whose cross-reference table lists `entries` objects (20 bytes each,
    most pointing nowhere, or, `damaged_unused`, not entries at all): pypdf reads the
    entries one by one in Python."""
    out, offsets = _pdf_head()
    xref = out.tell()
    unused = b"no entry, just junk\n" if damaged_unused else b"%010d 00000 n \n" % 9
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % entries)
    out.write(
        b"".join(
            b"%010d 00000 n \n" % offsets[i] if i in offsets else unused for i in range(1, entries)
        )
    )
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\n" % entries)
    out.write(b"startxref\n%d\n%%%%EOF\n" % xref)
    return out.getvalue()


def _xref_row(widths: tuple[int, int, int], kind: int, first: int, second: int) -> bytes:
    return b"".join(
        value.to_bytes(width, "big")
        for value, width in zip((kind, first, second), widths, strict=True)
    )


def _with_xref_stream(
    out: io.BytesIO,
    offsets: dict[int, int],
    *,
    entries: int | None = None,
    widths: tuple[int, int, int] = (1, 4, 2),
    compressed: dict[int, tuple[int, int]] | None = None,
    inflated: int = 0,
    extra: bytes = b"",
    unused_kind: int = 0,
) -> bytes:
    """`out` finished with a Flate-compressed cross-reference stream listing `offsets`
    (and `compressed`: object -> (object stream, index)), declaring `entries` entries
    (the rows beyond the real ones are free) and padded with zeros to `inflated` bytes."""
    compressed = compressed or {}
    number = max([*offsets, *compressed]) + 1
    at = out.tell()
    offsets = {**offsets, number: at}
    size = max(entries or 0, number + 1)
    rows = [_xref_row(widths, 0, 0, 65535)]
    for i in range(1, number + 1):
        if i in offsets:
            rows.append(_xref_row(widths, 1, offsets[i], 0))
        elif i in compressed:
            rows.append(_xref_row(widths, 2, *compressed[i]))
        else:
            rows.append(_xref_row(widths, 0, 0, 0))
    table = b"".join(rows)
    # The rows beyond the real ones: free (zeros), or of `unused_kind`.
    table += _xref_row(widths, unused_kind, 0, 0) * (size - len(rows)) if unused_kind else b""
    table += bytes(max(size * sum(widths), inflated) - len(table))
    data = zlib.compress(table, 9)
    out.write(
        b"%d 0 obj\n<< /Type /XRef /Size %d /W [%d %d %d] /Root 1 0 R /Filter /FlateDecode "
        b"/Length %d%s >>\nstream\n" % (number, size, *widths, len(data), extra)
    )
    out.write(data + b"\nendstream\nendobj\nstartxref\n%d\n%%%%EOF\n" % at)
    return out.getvalue()


def pdf_with_huge_xref_stream(entries: int = 2_000_000, *, unused_kind: int = 0) -> bytes:
    """A one-page PDF of about 12 KB whose compressed cross-reference stream declares
    `entries` entries (all but five free, or of the type `unused_kind`): pypdf reads every
    one in Python, seconds of CPU."""
    out, offsets = _pdf_head()
    return _with_xref_stream(out, offsets, entries=entries, unused_kind=unused_kind)


def pdf_with_xref_stream_bomb(inflated: int = 200_000_000) -> bytes:
    """A one-page PDF whose cross-reference stream lists five objects but inflates to
    `inflated` bytes of zeros (a few hundred KB on disk)."""
    out, offsets = _pdf_head()
    return _with_xref_stream(out, offsets, inflated=inflated)


def pdf_with_deep_nesting(depth: int = 200_000) -> bytes:
    """A one-page PDF whose catalog holds arrays nested `depth` deep."""
    out, offsets = io.BytesIO(), {}
    out.write(b"%PDF-1.4\n")
    for number, body in (
        (1, b"<< /Type /Catalog /Pages 2 0 R /Deep " + b"[" * depth + b"]" * depth + b" >>"),
        (2, b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>"),
        (3, b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>"),
    ):
        offsets[number] = out.tell()
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    return _with_classic_xref(out, offsets)


def pdf_with_padded_catalog(padding: int = 20_000_000) -> bytes:
    """A one-page PDF whose catalog is followed by `padding` spaces before `endobj`: pypdf
    looks for a `stream` keyword after a dictionary one byte at a time, in Python."""
    out, offsets = io.BytesIO(), {}
    out.write(b"%PDF-1.4\n")
    for number, body in (
        (1, b"<< /Type /Catalog /Pages 2 0 R >>" + b" " * padding),
        (2, b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>"),
        (3, b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>"),
    ):
        offsets[number] = out.tell()
        out.write(b"%d 0 obj\n%s\nendobj\n" % (number, body))
    return _with_classic_xref(out, offsets)


def pdf_with_huge_page_count(count: int = 10**15) -> bytes:
    """A one-page PDF whose page tree states `count` pages."""
    return _rewrite_xref(make_pdf(1).replace(b"/Count 1 >>", b"/Count %d >>" % count, 1))


def _object_stream_of(number: int, bodies: dict[int, bytes], declared: int | None = None) -> bytes:
    """Object `number`: a Flate object stream holding `bodies` (object number -> body), in
    order, its /N `declared` (by default the truth)."""
    header, position = [], 0
    for object_number, body in bodies.items():
        header.append(b"%d %d" % (object_number, position))
        position += len(body) + 1
    head = b" ".join(header) + b"\n"
    data = zlib.compress(head + b" ".join(bodies.values()), 9)
    return (
        b"%d 0 obj\n<< /Type /ObjStm /N %d /First %d /Filter /FlateDecode /Length %d >>\n"
        b"stream\n%s\nendstream\nendobj\n"
        % (number, declared or len(bodies), len(head), len(data), data)
    )


def pdf_with_huge_object_stream(objects: int = 400_000, declared: int | None = None) -> bytes:
    """A PDF whose catalog and page tree are in an object stream of `objects` objects
    (`declared` as its /N): pypdf parses every object of a stream it reads from."""
    bodies = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [] /Count 1 >>"]
    bodies += [b"<<>>"] * (objects - len(bodies))
    stream_number = objects + 1
    out = io.BytesIO()
    out.write(b"%PDF-1.5\n")
    offsets = {stream_number: out.tell()}
    out.write(_object_stream_of(stream_number, dict(enumerate(bodies, start=1)), declared))
    compressed = {
        number: (stream_number, index) for index, number in enumerate(range(1, objects + 1))
    }
    return _with_xref_stream(out, offsets, compressed=compressed, widths=(1, 4, 4))


def pdf_with_long_xref_chain(sections: int = 200_000) -> bytes:
    """A one-page PDF saved `sections` times over: a chain of cross-reference sections,
    each naming the one before it (/Prev), which pypdf reads one by one."""
    out, offsets = _pdf_head(b"1.4")
    previous = None
    for _ in range(sections):
        at = out.tell()
        out.write(b"xref\n0 1\n0000000000 65535 f \ntrailer\n<< /Size 4 /Root 1 0 R")
        out.write(b" /Prev %d >>\n" % previous if previous is not None else b" >>\n")
        previous = at
    return _with_classic_xref(out, offsets, prev=previous)


def _with_classic_xref(out: io.BytesIO, offsets: dict[int, int], prev: int | None = None) -> bytes:
    at = out.tell()
    count = max(offsets) + 1
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % count)
    out.write(b"".join(b"%010d 00000 n \n" % offsets[i] for i in range(1, count)))
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R%s >>\n" % (count, b" /Prev %d" % prev if prev else b"")
    )
    out.write(b"startxref\n%d\n%%%%EOF\n" % at)
    return out.getvalue()


def zip_with_huge_directory(entries: int = 575_000) -> bytes:
    """A DOCX-looking ZIP (word/document.xml and [Content_Types].xml among its members) whose
    central directory lists `entries` members in total, the rest empty: listing its members
    costs time and memory in proportion to the count while the file stays under 50 MB.
    """
    members = [
        (b"[Content_Types].xml", _CONTENT_TYPES.encode()),
        (b"word/document.xml", _document_xml([_paragraph("w", "Hello")], "w")),
    ]
    # Five-character names keep each empty member at 86 bytes (local + central header).
    members += [(b"%05x" % number, b"") for number in range(entries - len(members))]
    out, directory = io.BytesIO(), io.BytesIO()
    local_header = struct.Struct("<IHHHHHIIIHH")
    central_header = struct.Struct("<IHHHHHHIIIHHHHHII")
    for name, body in members:
        crc, size, offset = zlib.crc32(body), len(body), out.tell()
        # Stored (method 0), dated 1980-01-01, no extra fields.
        out.write(local_header.pack(0x04034B50, 20, 0, 0, 0, 0x21, crc, size, size, len(name), 0))
        out.write(name + body)
        directory.write(
            central_header.pack(
                0x02014B50, 20, 20, 0, 0, 0, 0x21, crc, size, size, len(name), 0, 0, 0, 0, 0, offset
            )
            + name
        )
    directory_at, directory_size = out.tell(), directory.tell()
    out.write(directory.getvalue())
    # Over 65,535 members need the ZIP64 end records; the classic record then says 0xFFFF.
    zip64_at = out.tell()
    out.write(struct.pack("<IQHHII", 0x06064B50, 44, 45, 45, 0, 0))
    out.write(struct.pack("<QQQQ", entries, entries, directory_size, directory_at))
    out.write(struct.pack("<IIQI", 0x07064B50, 0, zip64_at, 1))
    count = min(entries, 0xFFFF)
    out.write(
        struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, directory_size, directory_at, 0)
    )
    return out.getvalue()


def pdf_with_lying_count(real_pages: int = 4000, stated: int = 1) -> bytes:
    """A page tree whose root /Count says `stated` while /Kids holds `real_pages` pages, so a
    check that trusts /Count (cheap, at upload) and one that walks the tree disagree.
    """
    data = make_pdf(real_pages, words_per_page=20)
    data = data.replace(b"/Count %d >>" % real_pages, b"/Count %d >>" % stated, 1)
    return _rewrite_xref(data)


def pdf_with_pages_in_an_object_stream(real_pages: int = 40, stated: int | None = None) -> bytes:
    """A PDF whose catalog, page tree and `real_pages` pages are compressed in one object
    stream, each page showing "Page N", its content a plain object; the tree's /Count
    says `stated` (by default the truth). Page objects in an object stream are not in
    the file's bytes: a count of them there finds none."""
    pages = range(3, 3 + real_pages)
    contents = {page: page + real_pages for page in pages}
    kids = b" ".join(b"%d 0 R" % page for page in pages)
    bodies = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, stated or real_pages),
    }
    font = 3 + 2 * real_pages
    for page in pages:
        bodies[page] = (
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 %d 0 R >> >> /Contents %d 0 R >>" % (font, contents[page])
        )
    stream_number = font + 1
    out = io.BytesIO()
    out.write(b"%PDF-1.5\n")
    offsets = {}
    for page in pages:
        text = b"BT /F1 24 Tf 72 700 Td (Page %d) Tj ET" % (page - 2)
        offsets[contents[page]] = out.tell()
        out.write(
            b"%d 0 obj\n<< /Length %d >>\nstream\n%s\nendstream\nendobj\n"
            % (contents[page], len(text), text)
        )
    offsets[font] = out.tell()
    out.write(b"%d 0 obj\n<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>\nendobj\n" % font)
    offsets[stream_number] = out.tell()
    out.write(_object_stream_of(stream_number, bodies))
    compressed = {number: (stream_number, index) for index, number in enumerate(bodies)}
    return _with_xref_stream(out, offsets, compressed=compressed)


def pdf_with_shared_heavy_content(pages: int = 3, stream_mb: float = 2) -> bytes:
    """Every page draws the same Flate-compressed content stream of `stream_mb` MiB of text
    operators: a file of a few KB in which each page costs text extraction (about half a
    second of CPU for 2 MiB, 1.8 million characters; a page within the limit of text on
    one page, 0.15 MiB, about 0.05 s).
    """
    words = int(stream_mb * 2**20) // _BYTES_PER_WORD
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf(1, words_per_page=words))))
    first = writer.pages[0]
    first.compress_content_streams()
    for _ in range(pages - 1):
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = first["/Resources"]
        page[NameObject("/Contents")] = first.raw_get("/Contents")  # the same indirect object
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def docx_inflating(xml_mb: int = 60, *, text: str = LOREM * 3) -> bytes:
    """A zip-bomb-like DOCX: a few hundred KB on disk whose valid document.xml inflates to
    about `xml_mb` MiB of identical paragraphs of `text`."""
    paragraph = _paragraph("w", text)
    batch = paragraph * 1000
    batches = max(1, xml_mb * 2**20 // len(batch))
    head, tail = _document_xml([], "w").split(b"</w:body>")
    return _replace_document_xml(make_docx(0), [head, *[batch] * batches, b"</w:body>" + tail])


def docx_outgrowing_memory(xml_mb: int = 120) -> bytes:
    """A DOCX whose text, read as it streams past, outgrows a few hundred MB of memory in
    about a second of CPU: CJK Extension B ideographs, four bytes each in memory."""
    return docx_inflating(xml_mb, text="\U00020000" * 300)


MC_NS = "http://schemas.openxmlformats.org/markup-compatibility/2006"


def docx_of_body(body: str, *, footnotes: str = "", stated_pages: int | None = 1) -> bytes:
    """A DOCX whose body is `body` (WordprocessingML with the `w:` and `mc:` prefixes bound)
    and, if given, whose footnotes part holds `footnotes`."""
    xml = (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        f'<w:document xmlns:w="{W_NS}" xmlns:mc="{MC_NS}"><w:body>{body}</w:body></w:document>'
    ).encode()
    data = _replace_document_xml(make_docx(0, pages_property=stated_pages), [xml])
    if not footnotes:
        return data
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            target.writestr(info, source.read(info))
        target.writestr(
            "word/footnotes.xml", f'<w:footnotes xmlns:w="{W_NS}">{footnotes}</w:footnotes>'
        )
    return out.getvalue()


def docx_with_member_damaged(member: str, *, method: int | None = None) -> bytes:
    """A DOCX whose `member` has deflate data that does not inflate, or, with `method`,
    names a compression method zipfile lacks. Unless that member is docProps/app.xml, the
    file has none, so accept reads its body."""
    data = docx_of_body("<w:p><w:r><w:t>Hello there</w:t></w:r></w:p>")
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            if info.filename != "docProps/app.xml" or member == info.filename:
                target.writestr(info, source.read(info), zipfile.ZIP_DEFLATED)
    raw = bytearray(out.getvalue())
    with zipfile.ZipFile(io.BytesIO(bytes(raw))) as archive:
        info = archive.getinfo(member)
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    if method is None:
        raw[start : start + 8] = b"\xff" * 8  # not a deflate stream
        return bytes(raw)
    # The method is named in the local header and in the central directory entry.
    struct.pack_into("<H", raw, info.header_offset + 8, method)
    at = bytes(raw).find(b"PK\x01\x02")
    while at >= 0:
        name_length = struct.unpack_from("<H", raw, at + 28)[0]
        if bytes(raw[at + 46 : at + 46 + name_length]) == info.filename.encode():
            struct.pack_into("<H", raw, at + 10, method)
            break
        at = bytes(raw).find(b"PK\x01\x02", at + 4)
    return bytes(raw)


def docx_with_prefix(words: int = 3000, prefix: str = "ns0") -> bytes:
    """A valid DOCX whose WordprocessingML is written with `prefix:` instead of `w:`, as some
    generators (lxml or ElementTree defaults) do; XML readers see the same document, but
    byte-level searches for `<w:t` find nothing.
    """
    text = (LOREM * (words // 20 + 1)).split()[:words]
    paragraphs = [_paragraph(prefix, " ".join(text[i : i + 100])) for i in range(0, len(text), 100)]
    xml = _document_xml(paragraphs, prefix)
    return _replace_document_xml(make_docx(0, pages_property=1), [xml])


def docx_many_words(words: int = 200_000, stated_pages: int = 1) -> bytes:
    """A real DOCX of about `words` words (hundreds of pages) whose docProps/app.xml says
    <Pages>{stated_pages}</Pages>, as a stale or edited property would.
    """
    # make_docx adds "Paragraph N." to each paragraph: 198 + 2 = 200 words apiece.
    return make_docx(max(1, words // 200), words_per_paragraph=198, pages_property=stated_pages)


def multipart_many_files(files: int, size: int) -> tuple[bytes, str]:
    """A multipart/form-data body with `files` parts of `size` bytes each, all in the field
    `file`: one request that carries many uploads at once.
    """
    payload = (b"%PDF-1.4\n" + b"0" * size)[:size]
    _, content_type = multipart_body("", b"")  # only to learn the boundary
    closing = f"--{content_type.partition('boundary=')[2]}--\r\n".encode()
    parts = [
        multipart_body(f"file-{number}.pdf", payload)[0].removesuffix(closing)
        for number in range(1, files + 1)
    ]
    return b"".join(parts) + closing, content_type


_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/word/document.xml" ContentType="application/'
    'vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>'
)


def _paragraph(prefix: str, text: str) -> bytes:
    p = prefix
    return f"<{p}:p><{p}:r><{p}:t>{text}</{p}:t></{p}:r></{p}:p>".encode()


def _document_xml(paragraphs: list[bytes], prefix: str) -> bytes:
    p = prefix
    return (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        f'<{p}:document xmlns:{p}="{W_NS}"><{p}:body>'.encode()
        + b"".join(paragraphs)
        + f"</{p}:body></{p}:document>".encode()
    )


def zipped(members: dict[str, bytes | str]) -> bytes:
    """A ZIP (deflated) of `members`, name -> body, in that order."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, body in members.items():
            archive.writestr(name, body)
    return out.getvalue()


def _replace_document_xml(docx: bytes, chunks: list[bytes]) -> bytes:
    """`docx` with word/document.xml replaced by the concatenation of `chunks`."""
    source = zipfile.ZipFile(io.BytesIO(docx))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            if info.filename != "word/document.xml":
                target.writestr(info, source.read(info))
                continue
            with target.open("word/document.xml", "w") as member:
                for chunk in chunks:
                    member.write(chunk)
    return out.getvalue()


def _rewrite_xref(pdf: bytes) -> bytes:
    """Recompute the xref table of a make_pdf() file after an edit changed object lengths."""
    body = pdf[: pdf.rindex(b"\nxref\n") + 1]
    trailer = pdf[pdf.rindex(b"trailer\n") : pdf.rindex(b"startxref\n")]
    offsets = [m.start() for m in re.finditer(rb"^\d+ 0 obj$", body, re.MULTILINE)]
    table = b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    return (
        body
        + b"xref\n0 %d\n0000000000 65535 f \n" % (len(offsets) + 1)
        + table
        + trailer
        + b"startxref\n%d\n%%%%EOF\n" % len(body)
    )


def docx_of_empty_paragraphs(
    xml_mb: float = 190, *, stated_pages: int = 1, tail: bytes = b""
) -> bytes:
    """A DOCX of a few hundred KB stating `stated_pages` whose document.xml inflates to
    about `xml_mb` MiB of empty paragraphs (no word at all); `tail` replaces its closing
    tags (a bad one makes extraction fail at the very end, after all the parsing)."""
    head, end = _document_xml([], "w").split(b"</w:body>")
    batch = b"<w:p/>" * 100_000
    batches = max(1, int(xml_mb * 2**20) // len(batch))
    closing = tail or b"</w:body>" + end
    data = make_docx(0, pages_property=stated_pages)
    return _replace_document_xml(data, [head, *[batch] * batches, closing])


def docx_of_heavy_markup(xml_mb: float = 4, *, stated_pages: int = 1) -> bytes:
    """A DOCX stating `stated_pages` whose document.xml is about `xml_mb` MiB of empty
    paragraphs, each with random revision ids, as Word writes them: no word, and markup
    that compresses about three times, as real markup does."""

    rng = random.Random(7)
    count = int(xml_mb * 2**20) // 60
    paragraphs = [
        b'<w:p w:rsidR="%08X" w:rsidRDefault="%08X" w:rsidP="%08X"/>'
        % (rng.getrandbits(32), rng.getrandbits(32), rng.getrandbits(32))
        for _ in range(count)
    ]
    xml = _document_xml(paragraphs, "w")
    return _replace_document_xml(make_docx(0, pages_property=stated_pages), [xml])


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_stating(width: int, height: int) -> bytes:
    """A PNG of a few dozen bytes whose header states `width` x `height` one-bit pixels:
    what a decompression bomb looks like before it is decoded."""
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    rows = zlib.compress(b"\x00" * (width // 8 + 2), 9)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", rows)
        + _png_chunk(b"IEND", b"")
    )
