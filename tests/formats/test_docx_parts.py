"""A Word file's parts are found through its package's relationships, at accept and at
extract (formats/docx_package.py), with the bounds every part the reader parses has:
files made as Word Online, LibreOffice and python-docx make them, and packages crafted
to name their parts oddly, lack them or be too big."""

import io

import pytest

from core.errors import UnreadableDocument, UnsupportedFileType
from documents.reading import accept_limits
from formats import docx
from formats.base import Deadline
from formats.docx_package import MAX_RELS_BYTES
from tests.support.docx_makers import (
    MAIN,
    PACKAGE_REL,
    PRODUCERS,
    REL,
    content_types_xml,
    libreoffice,
    paragraph,
    part_xml,
    python_docx,
    relationships_xml,
    run,
    word_online,
    workbook_named_docx,
    zipped,
)


def inspect(data: bytes):
    return docx.inspect(io.BytesIO(data), limits=accept_limits(), deadline=Deadline(10))


def blocks(data: bytes, limits) -> list[str]:
    return docx.extract(data, limits=limits).text.split("\n\n")


def package(main: str, relationships: list[tuple[str, str]], parts: dict[str, str]) -> bytes:
    """A package whose `_rels/.rels` names `main`, whose main part's relationships are
    (type, target) each, and which holds `parts` (member name: XML) beside them."""
    folder, _, base = main.rpartition("/")
    rels = f"{folder}/_rels/{base}.rels" if folder else f"_rels/{base}.rels"
    return zipped(
        {
            "[Content_Types].xml": content_types_xml({f"/{main}": MAIN}),
            "_rels/.rels": relationships_xml([("rId1", f"{REL}/officeDocument", main)]),
            rels: relationships_xml(
                [
                    (f"rId{n}", f"{REL}/{kind}", target)
                    for n, (kind, target) in enumerate(relationships, start=1)
                ]
            ),
            **parts,
        }
    )


def body(*paragraphs: str) -> str:
    return part_xml("document", f"<w:body>{''.join(paragraphs)}</w:body>")


def test_a_word_online_file_is_read_from_document2_through_its_relationships(limits):
    data = word_online(
        paragraph(run("Quarterly report.")),
        header=paragraph(run("Contoso Ltd")),
        footer=paragraph(run("Confidential")),
        footnote=paragraph(run("Unaudited figures.")),
        comment="Check the totals",
    )

    inspection = inspect(data)

    assert (inspection.kind, inspection.pages, inspection.estimated) == ("docx", 1, True)
    assert blocks(data, limits) == [
        "Quarterly report.",
        "Contoso Ltd",
        "Confidential",
        "Unaudited figures.",
        "Check the totals",
    ]


@pytest.mark.parametrize("make", PRODUCERS.values(), ids=PRODUCERS.keys())
def test_each_producers_headers_footers_and_comments_are_found(make, limits):
    data = make(
        paragraph(run("Body text.")),
        header=paragraph(run("Header text")),
        footer=paragraph(run("Footer text")),
        comment="A remark",
    )

    assert inspect(data).kind == "docx"
    assert blocks(data, limits) == ["Body text.", "Header text", "Footer text", "A remark"]


@pytest.mark.parametrize("make", [word_online, libreoffice], ids=["word-online", "libreoffice"])
def test_footnotes_are_found_and_count_as_pages(make, limits):
    data = make(paragraph(run("Body.")), footnote=paragraph(run("The note.")))

    assert blocks(data, limits) == ["Body.", "The note."]


def test_the_pages_a_file_states_are_read_where_its_relationships_say(limits):
    # LibreOffice states its pages in docProps/app.xml, which _rels/.rels names.
    data = libreoffice(paragraph(run("A few words.")), pages=7)

    assert inspect(data).pages == 7
    assert docx.extract(data, limits=limits).page_count == 7


def test_relative_and_absolute_targets_are_resolved_from_the_part_that_names_them(limits):
    data = package(
        "content/main.xml",
        [
            ("styles", "/content/styles.xml"),
            ("header", "tops/top.xml"),  # content/tops/top.xml
            ("footer", "../shared/bottom.xml"),  # shared/bottom.xml
            ("comments", "/content/notes%20and%20comments.xml"),
            ("header", "../../outside.xml"),  # outside the package: not a part
            ("header", "missing.xml"),  # not in the file: skipped
        ],
        {
            "content/main.xml": body(paragraph(run("Main text."))),
            "content/styles.xml": part_xml("styles", ""),
            "content/tops/top.xml": part_xml("hdr", paragraph(run("Top"))),
            "shared/bottom.xml": part_xml("ftr", paragraph(run("Bottom"))),
            "content/notes and comments.xml": part_xml(
                "comments", f'<w:comment w:id="0">{paragraph(run("Remark"))}</w:comment>'
            ),
            "outside.xml": part_xml("hdr", paragraph(run("Not read"))),
        },
    )

    assert inspect(data).pages == 1
    assert blocks(data, limits) == ["Main text.", "Top", "Bottom", "Remark"]


def test_parts_no_relationship_names_are_not_read(limits):
    # A header left in the file that no relationship names: Word does not show it.
    data = package(
        "word/document.xml",
        [],
        {
            "word/document.xml": body(paragraph(run("Shown."))),
            "word/header1.xml": part_xml("hdr", paragraph(run("Orphan"))),
            "word/footnotes.xml": part_xml("footnotes", ""),
        },
    )

    assert blocks(data, limits) == ["Shown."]


def test_a_web_address_and_the_main_part_itself_are_not_parts_to_read(limits):
    rels = relationships_xml([("r1", f"{REL}/header", "document.xml")])
    external = (
        f'<Relationship Id="r2" Type="{REL}/header" Target="header1.xml" TargetMode="External"/>'
    )
    data = zipped(
        {
            "_rels/.rels": relationships_xml(
                [("r1", f"{REL}/officeDocument", "word/document.xml")]
            ),
            "word/_rels/document.xml.rels": rels.replace(
                "</Relationships>", f"{external}</Relationships>"
            ),
            "word/document.xml": body(paragraph(run("Once."))),
            "word/header1.xml": part_xml("hdr", paragraph(run("Not a part of this one"))),
        }
    )

    assert blocks(data, limits) == ["Once."]


def test_a_package_naming_no_main_part_is_read_from_word_document_xml_as_before(limits):
    data = zipped(
        {
            "[Content_Types].xml": content_types_xml({"/word/document.xml": MAIN}),
            "word/document.xml": body(paragraph(run("Hand made."))),
        }
    )

    assert inspect(data).pages == 1
    assert blocks(data, limits) == ["Hand made."]


def test_a_zip_whose_main_part_is_not_a_word_document_is_not_a_word_document(limits):
    workbook = workbook_named_docx()

    with pytest.raises(UnsupportedFileType, match="a ZIP archive that is not a Word document"):
        inspect(workbook)
    with pytest.raises(UnreadableDocument) as refused:
        docx.extract(workbook, limits=limits)  # accepted as Word once: damaged since
    assert refused.value.code == "damaged_docx"


@pytest.mark.parametrize(
    "members",
    [
        # The package names a main part it does not hold.
        {"_rels/.rels": relationships_xml([("r", f"{REL}/officeDocument", "word/document2.xml")])},
        # Relationships that are not XML.
        {"_rels/.rels": "<Relationships", "word/document.xml": body()},
        # A main part that is not XML.
        {
            "_rels/.rels": relationships_xml([("r", f"{REL}/officeDocument", "word/a.xml")]),
            "word/a.xml": "no markup",
        },
        # Relationships with a DTD, or an entity (which needs one).
        {
            "_rels/.rels": '<!DOCTYPE Relationships SYSTEM "https://example.com/r.dtd">'
            "<Relationships/>",
            "word/document.xml": body(),
        },
        {
            "_rels/.rels": '<!DOCTYPE r [<!ENTITY a "b">]><Relationships/>',
            "word/document.xml": body(),
        },
    ],
    ids=["main-part-missing", "rels-not-xml", "main-not-xml", "rels-with-dtd", "rels-with-entity"],
)
def test_a_package_whose_relationships_cannot_be_followed_is_damaged(members, limits):
    data = zipped(members)

    for read in (lambda: inspect(data), lambda: docx.extract(data, limits=limits)):
        with pytest.raises(UnreadableDocument) as refused:
            read()
        assert refused.value.code == "damaged_docx"


def test_relationships_larger_than_any_word_writes_are_refused(limits):
    padding = " " * (MAX_RELS_BYTES + 1)
    data = zipped(
        {
            "_rels/.rels": relationships_xml(
                [("r", f"{REL}/officeDocument", "word/document.xml")]
            ).replace("</Relationships>", f"{padding}</Relationships>"),
            "word/document.xml": body(paragraph(run("Text"))),
        }
    )

    for read in (lambda: inspect(data), lambda: docx.extract(data, limits=limits)):
        with pytest.raises(UnreadableDocument) as refused:
            read()
        assert refused.value.code == "docx_too_large"


def test_relationships_that_inflate_like_a_bomb_are_refused_before_they_are_read():
    padding = " " * (3 * 1024 * 1024)  # 3 MiB of spaces deflate to a few KB
    data = zipped(
        {
            "_rels/.rels": relationships_xml([("r", f"{REL}/officeDocument", "word/document.xml")]),
            "word/_rels/document.xml.rels": relationships_xml([]).replace(
                "</Relationships>", f"{padding}</Relationships>"
            ),
            "word/document.xml": body(paragraph(run("Text"))),
        }
    )

    with pytest.raises(UnreadableDocument) as refused:
        inspect(data)
    assert refused.value.code == "docx_too_compressed"
    assert "word/_rels/document.xml.rels" in refused.value.message


def test_a_renamed_main_part_is_held_to_the_compression_bound_and_charged_its_markup():
    empty = paragraph() * 400_000  # 2.7 MiB of empty paragraphs, deflating about 1000 times
    bomb = word_online(empty)

    with pytest.raises(UnreadableDocument) as refused:
        inspect(bomb)
    assert refused.value.code == "docx_too_compressed"
    assert "word/document2.xml" in refused.value.message


def test_a_renamed_main_parts_markup_is_charged_as_pages(limits):
    # Markup that compresses as Word's does: each paragraph a revision id of its own.
    heavy = "".join(f'<w:p w:rsidR="{n:08X}"/>' for n in range(130_000))  # about 3.3 MiB
    data = word_online(heavy, paragraph(run("Few words.")))

    assert inspect(data).pages == 4
    assert docx.extract(data, limits=limits).page_count == 4


def test_a_python_docx_file_finds_its_parts_through_relative_targets(limits):
    data = python_docx(paragraph(run("Plain.")), header=paragraph(run("Top")))

    assert blocks(data, limits) == ["Plain.", "Top"]


def test_package_relationship_types_are_matched_on_their_last_word(limits):
    strict = "http://purl.oclc.org/ooxml/officeDocument/relationships"
    data = zipped(
        {
            "_rels/.rels": relationships_xml(
                [
                    ("r0", f"{PACKAGE_REL}/metadata/core-properties", "docProps/core.xml"),
                    ("r1", f"{strict}/officeDocument", "word/document.xml"),
                ]
            ),
            "word/_rels/document.xml.rels": relationships_xml(
                [("r1", f"{strict}/header", "header1.xml")]
            ),
            "word/document.xml": body(paragraph(run("Strict."))),
            "word/header1.xml": part_xml("hdr", paragraph(run("Strict header"))),
        }
    )

    assert blocks(data, limits) == ["Strict.", "Strict header"]
