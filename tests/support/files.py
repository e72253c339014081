"""Real documents built in memory for tests and benchmarks."""

import io
import re
import zipfile
from collections.abc import Collection

from docx import Document as DocxDocument
from pypdf import PdfReader, PdfWriter

LOREM = (
    "Paperlane turns documents into searchable text. Each page of this file carries a "
    "paragraph so that extraction, chunking and embedding have real words to work on. "
)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(
    pages: int = 1,
    *,
    words_per_page: int = 60,
    label: str = "Page",
    broken_pages: Collection[int] = (),
    trailer_root: bool = True,
) -> bytes:
    """A valid PDF with `pages` pages of Helvetica text and a correct xref table; the
    content of each of `broken_pages` (numbered from 1) ends in an inline image cut off
    before its end, as in a truncated content stream: PDFium reads the text before the
    cut, pypdf cannot read the page. Without `trailer_root` the trailer does not name
    the catalog: PDFium refuses the file, and pypdf, which finds the catalog, reads it."""
    objects: list[bytes] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    catalog = add(b"")  # filled in below, once the page tree number is known
    pages_id = add(b"")
    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    words = (LOREM * (words_per_page // 20 + 1)).split()[:words_per_page]
    kids = []
    for number in range(1, pages + 1):
        lines = [f"{label} {number}"] + [
            " ".join(words[i : i + 10]) for i in range(0, len(words), 10)
        ]
        ops = ["BT", "/F1 11 Tf", "14 TL", "72 740 Td"]
        for line in lines:
            ops.append(f"({_escape(line)}) Tj T*")
        ops.append("ET")
        if number in broken_pages:
            ops.append("BI /W 1 /H 1 /BPC 8 /CS /G ID x")  # an inline image cut off
        stream = "\n".join(ops).encode("latin-1")
        content = add(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        kids.append(
            add(
                b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] "
                b"/Resources << /Font << /F1 %d 0 R >> >> /Contents %d 0 R >>"
                % (pages_id, font, content)
            )
        )
    objects[catalog - 1] = b"<< /Type /Catalog /Pages %d 0 R >>" % pages_id
    objects[pages_id - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids),
        len(kids),
    )
    return pdf_of_objects(objects, root=catalog if trailer_root else None)


def with_outline(data: bytes, entries: list[tuple[str, int]]) -> bytes:
    """The PDF with bookmarks: (title, page from 1)."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    for title, page in entries:
        writer.add_outline_item(title=title, page_number=page - 1)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def pdf_of_objects(objects: list[bytes], *, root: int | None = 1) -> bytes:
    """A PDF holding `objects` (numbered from 1, in order) with a correct cross-reference
    table; its trailer names object `root` as the catalog (None: it names none)."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    named = b" /Root %d 0 R" % root if root is not None else b""
    out.write(
        b"trailer\n<< /Size %d%s >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, named, xref)
    )
    return out.getvalue()


def make_damaged_pdf(pages: int = 3) -> bytes:
    """Looks whole (header, trailer, page count) but its page tree points nowhere:
    accepted at upload, refused by extraction."""
    return re.sub(
        rb"/Kids \[[^\]]*\]",
        b"/Kids [" + b" ".join(b"%d 0 R" % (900 + n) for n in range(pages)) + b"]",
        make_pdf(pages),
    )


def make_encrypted_pdf(pages: int = 2, *, password: str = "secret") -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf(pages))))
    writer.encrypt(user_password=password, owner_password=password + "-owner")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_owner_only_encrypted_pdf(pages: int = 2) -> bytes:
    """Encrypted with an empty user password: anyone can open it, as readers do."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(make_pdf(pages))))
    writer.encrypt(user_password="", owner_password="owner")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def make_docx(
    paragraphs: int = 5, *, words_per_paragraph: int = 80, pages_property: int | None = None
) -> bytes:
    """A real .docx written by python-docx; optionally with <Pages> set in docProps/app.xml."""
    document = DocxDocument()
    words = (LOREM * (words_per_paragraph // 20 + 1)).split()[:words_per_paragraph]
    for number in range(paragraphs):
        document.add_paragraph(f"Paragraph {number + 1}. " + " ".join(words))
    buffer = io.BytesIO()
    document.save(buffer)
    data = buffer.getvalue()
    return _set_app_pages(data, pages_property)


def _set_app_pages(data: bytes, pages: int | None) -> bytes:
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            body = source.read(info.filename)
            if info.filename == "docProps/app.xml":
                text = body.decode()
                text = re.sub(r"<Pages>\d*</Pages>", "", text)
                text = re.sub(r"<Words>\d*</Words>", "", text)
                if pages is not None:
                    text = text.replace("</Properties>", f"<Pages>{pages}</Pages></Properties>")
                body = text.encode()
            target.writestr(info, body)
    return out.getvalue()


HTML_AS_PDF = b"<!DOCTYPE html><html><head><title>Not a PDF</title></head><body>hi</body></html>"


def multipart_body(filename: str, data: bytes, *, field: str = "file") -> tuple[bytes, str]:
    """A multipart/form-data body carrying `filename` exactly as given."""
    boundary = "----paperlane-test-boundary"
    head = (
        f"--{boundary}\r\n"
        f'Content-Disposition: form-data; name="{field}"; filename="{filename}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    body = head + data + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def make_overprinted_pdf(line: str) -> bytes:
    """A one-page PDF whose `line` is printed twice, the second time 0.4 pt to the right:
    bold made by overprinting, as some producers do."""
    text = _escape(line).encode("latin-1")
    stream = b"BT /F1 14 Tf 72 740 Td (%s) Tj ET BT /F1 14 Tf 72.4 740 Td (%s) Tj ET" % (
        text,
        text,
    )
    return one_page_pdf(stream, font=b"Helvetica-Bold")


def one_page_pdf(
    content: bytes, *, font: bytes = b"Helvetica", stream_keys: bytes = b"", root: int | None = 1
) -> bytes:
    """A one-page PDF drawing `content` (its font /F1 is `font`; `stream_keys` are more
    entries of the content stream's dictionary, a /Filter say); `root` as pdf_of_objects."""
    return pdf_of_objects(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
            b" /Resources << /Font << /F1 5 0 R >> >> >>",
            b"<< /Length %d%s >>\nstream\n%s\nendstream" % (len(content), stream_keys, content),
            b"<< /Type /Font /Subtype /Type1 /BaseFont /%s >>" % font,
        ],
        root=root,
    )
