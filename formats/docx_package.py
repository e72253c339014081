"""A Word file's package: the ZIP's bounds, and where its parts are, found as Word finds
them, through the package's relationships, never by fixed names.

`_rels/.rels` names the main part (the relationship whose type ends in /officeDocument):
Word writes `word/document.xml`, Word Online and SharePoint `word/document2.xml`. The main
part's own relationships (`word/_rels/document2.xml.rels` for that one) name its styles,
headers, footers, footnotes, endnotes and comments; a target is relative to the folder of
the part that names it, or absolute from the package's root. A package that names no main
part is read from `word/document.xml` if it has one, as files were before relationships
were read. The main part must be a WordprocessingML document: an Excel workbook renamed
.docx is not a Word document.

Relationship parts are small XML: each is read whole, with the reader's safe parser, up
to MAX_RELS_BYTES.
"""

import posixpath
import struct
import zipfile
import zlib
from dataclasses import dataclass
from typing import BinaryIO
from urllib.parse import unquote
from xml.parsers import expat

from core.errors import UnreadableDocument, UnsupportedFileType
from formats.base import SUPPORTED

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
# The same vocabulary in ISO 29500 Strict.
W_STRICT = "http://purl.oclc.org/ooxml/wordprocessingml/main"
MAX_MEMBERS = 5000
# Room for MAX_MEMBERS entries with long names.
MAX_DIRECTORY_BYTES = 2 * 1024 * 1024
# A document with thousands of links has a few hundred KB of relationships.
MAX_RELS_BYTES = 4 * 1024 * 1024
PACKAGE_RELS = "_rels/.rels"
# Read as the main part when the package names none.
LEGACY_MAIN = "word/document.xml"
# The main part's root element is found within this much of its XML.
_ROOT_WITHIN = 64 * 1024
# Parts smaller than this inflated may compress as well as they like (a blank header).
_RATIO_FLOOR_BYTES = 1024 * 1024
# Errors reading a member of a damaged or unusual ZIP (bad deflate data, a compression
# method or encryption zipfile does not support, a cut-off member).
ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    NotImplementedError,
    RuntimeError,
    EOFError,
    OSError,
)


def damaged() -> UnreadableDocument:
    return UnreadableDocument(
        "The Word document could not be read; the file appears to be damaged.",
        code="damaged_docx",
    )


def too_large() -> UnreadableDocument:
    return UnreadableDocument(
        "The Word document expands to more data than we accept.", code="docx_too_large"
    )


def too_compressed(name: str, ratio: int) -> UnreadableDocument:
    return UnreadableDocument(
        f"The Word document's {name} expands to more than {ratio} times its size in the "
        "file, which Word never writes; saving it again from Word may help.",
        code="docx_too_compressed",
    )


def not_word() -> UnsupportedFileType:
    return UnsupportedFileType(f"{SUPPORTED}; this is a ZIP archive that is not a Word document.")


def safe_parser() -> expat.XMLParserType:
    """A namespace-aware expat parser that refuses DTDs and entity declarations
    (a Word document has neither)."""

    def refuse(*args) -> None:
        raise ValueError("DTDs and entities are not allowed in a Word document")

    parser = expat.ParserCreate(namespace_separator=" ")
    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    return parser


def check_directory(stream: BinaryIO) -> None:
    """Refuse a ZIP whose central directory is too big, from its end record alone,
    before anything parses the directory."""
    stream.seek(0, 2)
    size = stream.tell()
    window = min(size, 22 + 65535)  # the end record and the longest comment
    stream.seek(size - window)
    tail = stream.read(window)
    stream.seek(0)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        raise damaged()
    entries, directory_bytes = struct.unpack("<10xHI4x", tail[at : at + 20])
    if entries == 0xFFFF or directory_bytes == 0xFFFFFFFF:
        # ZIP64: the real numbers are in the ZIP64 end record the locator points to.
        locator = tail[at - 20 : at]
        if len(locator) < 20 or not locator.startswith(b"PK\x06\x07"):
            raise damaged()
        (record_at,) = struct.unpack("<8xQ4x", locator)
        stream.seek(record_at)
        record = stream.read(56)
        stream.seek(0)
        if len(record) < 56 or not record.startswith(b"PK\x06\x06"):
            raise damaged()
        entries, directory_bytes = struct.unpack("<32xQQ8x", record)
    if entries > MAX_MEMBERS or directory_bytes > MAX_DIRECTORY_BYTES:
        raise too_large()


def check_ratio(info: zipfile.ZipInfo, ratio: int) -> None:
    """Refuse a part that inflates more than `ratio` times its stored size, from the
    sizes the directory states (zipfile inflates no further than those)."""
    if info.file_size > _RATIO_FLOOR_BYTES and info.file_size > ratio * max(info.compress_size, 1):
        raise too_compressed(info.filename, ratio)


@dataclass(frozen=True)
class Parts:
    """Where a Word package keeps what is read of it (member names; None where it has none)."""

    main: str
    styles: str | None = None
    # Each in order of its number (header1, header2, ...), as Word numbers them.
    headers: tuple[str, ...] = ()
    footers: tuple[str, ...] = ()
    footnotes: str | None = None
    endnotes: str | None = None
    comments: str | None = None
    # docProps/app.xml, where the file states its pages and words.
    properties: str | None = None
    # The relationship parts read to find these.
    relationships: tuple[str, ...] = ()

    def markup(self) -> tuple[str, ...]:
        """The parts whose XML extraction parses: the body, styles, headers, footers,
        notes and comments, each once."""
        named = (self.main, self.styles, *self.headers, *self.footers)
        notes = (self.footnotes, self.endnotes, self.comments)
        return tuple(dict.fromkeys(name for name in (*named, *notes) if name))


def find_parts(archive: zipfile.ZipFile, *, ratio: int | None = None) -> Parts:
    """The package's parts, through its relationships. UnsupportedFileType for a ZIP that
    is not a Word document; damaged_docx for relationships that cannot be read or that
    name a main part the file lacks. With `ratio`, a relationship part that inflates more
    than that is refused before it is read."""
    members = _Members(archive.infolist())
    try:
        package = _relationships(archive, members, "", ratio)
        named = [part for kind, part in package if kind == "officeDocument"]
        if named:
            main = named[0]
            if main is None:
                raise damaged()  # the package names a main part it does not hold
        elif (main := members.name(LEGACY_MAIN)) is None:
            raise not_word()
        if not _is_word_document(archive, members.info(main)):
            raise not_word()
        related = _relationships(archive, members, main, ratio)
    except expat.ExpatError as exc:
        raise damaged() from exc

    def first(kind: str, among=related) -> str | None:
        return next((part for k, part in among if k == kind and part and part != main), None)

    def numbered(kind: str) -> tuple[str, ...]:
        found = {part for k, part in related if k == kind and part and part != main}
        return tuple(sorted(found, key=_number_then_name))

    return Parts(
        main=main,
        styles=first("styles"),
        headers=numbered("header"),
        footers=numbered("footer"),
        footnotes=first("footnotes"),
        endnotes=first("endnotes"),
        comments=first("comments"),
        properties=first("extended-properties", package),
        relationships=tuple(
            name
            for name in (members.name(_rels_of("")), members.name(_rels_of(main)))
            if name is not None
        ),
    )


class _Members:
    """The archive's members by name; a part name is matched without regard to case, as
    the package format compares them, where no member has it exactly."""

    def __init__(self, infos: list[zipfile.ZipInfo]) -> None:
        # The last of two members of one name is the one zipfile opens.
        self._by_name = {info.filename: info for info in infos}
        self._by_folded: dict[str, str] = {}
        for name in self._by_name:
            self._by_folded.setdefault(name.casefold(), name)

    def name(self, name: str) -> str | None:
        return name if name in self._by_name else self._by_folded.get(name.casefold())

    def info(self, name: str) -> zipfile.ZipInfo:
        return self._by_name[name]


def _rels_of(part: str) -> str:
    """The relationship part of `part` ("" for the package)."""
    folder, base = posixpath.split(part)
    return posixpath.join(folder, "_rels", f"{base}.rels")


def _resolve(source: str, target: str) -> str | None:
    """The part a relationship of `source` points to: a target is relative to the folder
    of `source`, or absolute from the package's root; None for one outside the package."""
    target = unquote(target.partition("#")[0]).strip()
    if not target:
        return None
    if target.startswith("/"):
        path = target.lstrip("/")
    else:
        path = posixpath.join(posixpath.dirname(source), target)
    path = posixpath.normpath(path)
    return None if path in (".", "..") or path.startswith("../") else path


def _relationships(
    archive: zipfile.ZipFile, members: _Members, source: str, ratio: int | None
) -> list[tuple[str, str | None]]:
    """(kind, member) for each relationship of `source` ("" for the package) to a part
    inside the package: the kind is the last word of its type (officeDocument, header,
    ...), the member None where the archive lacks it. Empty if `source` has no
    relationship part."""
    name = members.name(_rels_of(source))
    if name is None:
        return []
    info = members.info(name)
    if info.file_size > MAX_RELS_BYTES:
        raise too_large()
    if ratio is not None:
        check_ratio(info, ratio)
    found: list[tuple[str, str, str]] = []

    def start(element: str, attrs) -> None:
        if element.rpartition(" ")[2] == "Relationship":
            found.append(tuple(attrs.get(key, "") for key in ("Type", "Target", "TargetMode")))

    parser = safe_parser()
    parser.StartElementHandler = start
    with archive.open(info) as fh:
        parser.Parse(fh.read(MAX_RELS_BYTES), True)
    related = []
    for kind, target, mode in found:
        if mode.lower() == "external":
            continue  # a web address
        part = _resolve(source, target)
        related.append((kind.rpartition("/")[2], members.name(part) if part else None))
    return related


class _Root(Exception):
    pass


def _is_word_document(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> bool:
    """Whether the part's root element is a WordprocessingML document, from the start of
    its XML."""
    found: list[str] = []

    def start(name: str, attrs) -> None:
        found.append(name)
        raise _Root

    parser = safe_parser()
    parser.StartElementHandler = start
    read = 0
    with archive.open(info) as fh:
        while read < _ROOT_WITHIN:
            block = fh.read(4096)
            try:
                parser.Parse(block, not block)
            except _Root:
                break
            if not block:
                break
            read += len(block)
    if not found:
        raise damaged()
    namespace, _, local = found[0].rpartition(" ")
    return namespace in (W, W_STRICT) and local == "document"


def _number_then_name(name: str) -> tuple[int, str]:
    """header2.xml -> (2, name): the number before `.xml`, read without a regular
    expression (a member's name is the uploader's, of any length)."""
    base = posixpath.basename(name)
    stem = base[:-4] if base.lower().endswith(".xml") else ""
    digits = stem[len(stem.rstrip("0123456789")) :]
    return int(digits[:9] or 0), name
