"""A Word document's outline: its body's headings, with where each starts in the text."""

import io
import zipfile

import docx
from docx.enum.style import WD_STYLE_TYPE
from docx.oxml import OxmlElement
from docx.oxml.ns import qn

from formats.docx import extract


def _saved(document) -> bytes:
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _outline(data: bytes, limits):
    extracted = extract(data, limits=limits)
    return extracted, [(h.title, h.level) for h in extracted.outline]


def test_headings_of_the_built_in_styles_are_the_outline_with_their_offsets(limits):
    document = docx.Document()
    document.add_paragraph("Before any heading.")
    document.add_heading("Chapter  one", level=1)
    document.add_paragraph("Body of chapter one.")
    document.add_heading("A part", level=3)
    document.add_paragraph("Body of the part.")

    extracted, outline = _outline(_saved(document), limits)

    assert outline == [("Chapter one", 0), ("A part", 2)]
    assert [extracted.text[h.offset :].split("\n")[0] for h in extracted.outline] == [
        "Chapter  one",
        "A part",
    ]
    assert all(h.page is None for h in extracted.outline)
    assert extracted.outline[0].as_json() == {
        "title": "Chapter one",
        "level": 0,
        "offset": extracted.outline[0].offset,
    }


def test_a_style_based_on_a_heading_and_a_paragraphs_own_level_are_headings(limits):
    document = docx.Document()
    custom = document.styles.add_style("Site heading", WD_STYLE_TYPE.PARAGRAPH)
    custom.base_style = document.styles["Heading 2"]
    document.add_paragraph("Harbour sites", style="Site heading")
    own = document.add_paragraph("Appendix")
    level = OxmlElement("w:outlineLvl")
    level.set(qn("w:val"), "0")
    own._p.get_or_add_pPr().append(level)

    _, outline = _outline(_saved(document), limits)

    assert outline == [("Harbour sites", 1), ("Appendix", 0)]


def test_body_text_levels_a_title_and_headings_in_tables_are_not_the_outline(limits):
    document = docx.Document()
    # Word's "TOC Heading" is based on Heading 1 with outline level 9: body text.
    document.add_paragraph("Contents", style="TOC Heading")
    document.add_paragraph("Field notes", style="Title")
    plain = document.add_heading("Demoted", level=1)
    level = OxmlElement("w:outlineLvl")
    level.set(qn("w:val"), "9")
    plain._p.get_or_add_pPr().append(level)
    table = document.add_table(rows=1, cols=1)
    table.cell(0, 0).paragraphs[0].style = document.styles["Heading 1"]
    table.cell(0, 0).paragraphs[0].text = "In a cell"
    document.add_heading("Kept", level=1)

    extracted, outline = _outline(_saved(document), limits)

    assert outline == [("Kept", 0)]
    assert "In a cell" in extracted.text and "Contents" in extracted.text


def _restyled(data: bytes, old: bytes, new: bytes) -> bytes:
    """The document with `old` replaced by `new` in its styles part."""
    source = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for info in source.infolist():
            body = source.read(info.filename)
            if info.filename == "word/styles.xml":
                assert old in body
                body = body.replace(old, new)
            target.writestr(info, body)
    return out.getvalue()


def test_a_heading_style_that_names_no_type_is_a_paragraph_style(limits):
    document = docx.Document()
    document.add_heading("Untyped", level=1)
    data = _restyled(
        _saved(document),
        b'<w:style w:type="paragraph" w:styleId="Heading1">',
        b'<w:style w:styleId="Heading1">',
    )

    _, outline = _outline(data, limits)

    assert outline == [("Untyped", 0)]
