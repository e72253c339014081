"""Word files made the way their producers make them, for the Word reader's tests
(formats/docx.py): the package's part names, relationships and content types as each
writes them, and the body's markup as Word writes it.

- Word Online (and SharePoint) names the main part `word/document2.xml`; its package
  relationships point to it, and its own relationships (`word/_rels/document2.xml.rels`)
  to the other parts, by absolute targets (`/word/styles.xml`), with ids of its own.
- LibreOffice names the parts as Word does, points to them by targets relative to the
  main part's folder, numbers its relationships in its own order, lists the relationship
  parts in [Content_Types].xml and states its pages in docProps/app.xml.
- python-docx writes its template's parts and what its API adds (headers, footers,
  comments); the body's markup is added to its tree as it would be by hand.

A maker takes paragraphs (WordprocessingML, from the helpers below) for the body and,
optionally, a header, a footer and a footnote, and the text of a comment.
"""

import hashlib
import io
from xml.sax.saxutils import escape

from docx import Document as DocxDocument
from lxml import etree

from tests.support.hostile import zipped

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
PACKAGE_REL = "http://schemas.openxmlformats.org/package/2006/relationships"
MAIN = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
_OFFICE = "application/vnd.openxmlformats-officedocument"
_WML = f"{_OFFICE}.wordprocessingml"
# The namespaces Word declares on every part's root.
NAMESPACES = (
    f'xmlns:w="{W}" xmlns:r="{R}" '
    'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" '
    'xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing" '
    'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
    'xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape" '
    'xmlns:v="urn:schemas-microsoft-com:vml" '
    'xmlns:w14="http://schemas.microsoft.com/office/word/2010/wordml" mc:Ignorable="w14"'
)


# --- The body's markup, as Word writes it --------------------------------------------


def run(text: str) -> str:
    return f'<w:r><w:t xml:space="preserve">{escape(text)}</w:t></w:r>'


def paragraph(*content: str, tab_stops: bool = False) -> str:
    """A paragraph of `content` (runs and the like); with `tab_stops`, tab stops defined
    in its properties, as a paragraph with a tab in its style has."""
    properties = (
        '<w:pPr><w:tabs><w:tab w:val="left" w:pos="720"/><w:tab w:val="right" w:pos="9072"/>'
        "</w:tabs></w:pPr>"
        if tab_stops
        else ""
    )
    return f"<w:p>{properties}{''.join(content)}</w:p>"


def non_breaking_hyphen() -> str:
    """What Word writes for Ctrl+Shift+Hyphen."""
    return "<w:r><w:noBreakHyphen/></w:r>"


def soft_hyphen() -> str:
    return "<w:r><w:softHyphen/></w:r>"


def tab() -> str:
    return "<w:r><w:tab/></w:r>"


def symbol(font: str, char: str) -> str:
    """What Insert > Symbol writes for a character of a symbol font (char in hex)."""
    return f'<w:r><w:rPr><w:rFonts w:ascii="{font}" w:hAnsi="{font}"/></w:rPr><w:sym w:font="{font}" w:char="{char}"/></w:r>'  # noqa: E501


def text_box(*paragraphs: str) -> str:
    """A floating text box as Word writes it: a DrawingML shape for readers of Word 2010
    on, and the same box in VML for older ones, its paragraphs in both."""
    content = f"<w:txbxContent>{''.join(paragraphs)}</w:txbxContent>"
    return (
        "<w:r><mc:AlternateContent>"
        '<mc:Choice Requires="wps"><w:drawing><wp:anchor distT="0" distB="0" distL="114300" '
        'distR="114300" simplePos="0" relativeHeight="251659264" behindDoc="0" locked="0" '
        'layoutInCell="1" allowOverlap="1"><wp:simplePos x="0" y="0"/>'
        '<wp:extent cx="1828800" cy="457200"/><wp:docPr id="1" name="Text Box 1"/>'
        '<a:graphic><a:graphicData uri="http://schemas.microsoft.com/office/word/2010/'
        'wordprocessingShape"><wps:wsp><wps:cNvSpPr txBox="1"/><wps:spPr/>'
        f"<wps:txbx>{content}</wps:txbx><wps:bodyPr/></wps:wsp></a:graphicData></a:graphic>"
        "</wp:anchor></w:drawing></mc:Choice>"
        '<mc:Fallback><w:pict><v:shape id="Text Box 1" style="width:144pt;height:36pt">'
        f"<v:textbox>{content}</v:textbox></v:shape></w:pict></mc:Fallback>"
        "</mc:AlternateContent></w:r>"
    )


def field(instruction: str, result: str) -> str:
    """A field as Word writes most: begin, its instruction, separate, its result, end."""
    return (
        '<w:r><w:fldChar w:fldCharType="begin"/></w:r>'
        f'<w:r><w:instrText xml:space="preserve"> {escape(instruction)} </w:instrText></w:r>'
        '<w:r><w:fldChar w:fldCharType="separate"/></w:r>'
        f"{run(result)}"
        '<w:r><w:fldChar w:fldCharType="end"/></w:r>'
    )


def simple_field(instruction: str, result: str) -> str:
    return f'<w:fldSimple w:instr=" {escape(instruction)} ">{run(result)}</w:fldSimple>'


def inserted(text: str) -> str:
    return (
        f'<w:ins w:id="101" w:author="Reviewer" w:date="2024-03-01T10:00:00Z">{run(text)}</w:ins>'
    )


def deleted(text: str) -> str:
    return (
        '<w:del w:id="102" w:author="Reviewer" w:date="2024-03-01T10:00:00Z"><w:r>'
        f'<w:delText xml:space="preserve">{escape(text)}</w:delText></w:r></w:del>'
    )


def footnote_reference(number: int = 1) -> str:
    return (
        '<w:r><w:rPr><w:rStyle w:val="FootnoteReference"/></w:rPr>'
        f'<w:footnoteReference w:id="{number}"/></w:r>'
    )


# --- Packages ---------------------------------------------------------------------


def relationships_xml(relationships: list[tuple[str, str, str]]) -> str:
    """A relationship part: (id, type, target) each."""
    rows = "".join(
        f'<Relationship Id="{id_}" Type="{type_}" Target="{target}"/>'
        for id_, type_, target in relationships
    )
    return (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        f'<Relationships xmlns="{PACKAGE_REL}">{rows}</Relationships>'
    )


def content_types_xml(overrides: dict[str, str]) -> str:
    rows = "".join(
        f'<Override PartName="{name}" ContentType="{kind}"/>' for name, kind in overrides.items()
    )
    return (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
        'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
        f"{rows}</Types>"
    )


def part_xml(root: str, content: str, attributes: str = "") -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        f"<w:{root} {NAMESPACES}{attributes}>{content}</w:{root}>"
    )


def _document(body: str, header_id: str | None, footer_id: str | None) -> str:
    references = "".join(
        f'<w:{kind}Reference w:type="default" r:id="{id_}"/>'
        for kind, id_ in (("header", header_id), ("footer", footer_id))
        if id_
    )
    section = f'<w:sectPr>{references}<w:pgSz w:w="11906" w:h="16838"/></w:sectPr>'
    return part_xml("document", f"<w:body>{body}{section}</w:body>")


def _notes(kind: str, paragraphs: str) -> str:
    """A footnotes part: Word's two separators, then note 1."""
    separators = (
        f'<w:{kind} w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:{kind}>'
        f'<w:{kind} w:type="continuationSeparator" w:id="0"><w:p><w:r>'
        f"<w:continuationSeparator/></w:r></w:p></w:{kind}>"
    )
    return part_xml(f"{kind}s", f'{separators}<w:{kind} w:id="1">{paragraphs}</w:{kind}>')


def _comments(text: str) -> str:
    comment = (
        '<w:comment w:id="0" w:author="Reviewer" w:initials="R"><w:p><w:r><w:annotationRef/>'
        f"</w:r>{run(text)}</w:p></w:comment>"
    )
    return part_xml("comments", comment)


_STYLES = part_xml(
    "styles",
    '<w:style w:type="paragraph" w:default="1" w:styleId="Normal"><w:name w:val="Normal"/>'
    "</w:style>",
)


def _optional_parts(header: str, footer: str, footnote: str, comment: str) -> dict:
    """The parts asked for beside the main one, in the order Word writes them: each file
    name under word/ with its kind (the last word of its relationship type and content
    type) and its XML."""
    parts = {
        "header1.xml": ("header", header and part_xml("hdr", header)),
        "footer1.xml": ("footer", footer and part_xml("ftr", footer)),
        "footnotes.xml": ("footnotes", footnote and _notes("footnote", footnote)),
        "comments.xml": ("comments", comment and _comments(comment)),
    }
    return {name: (kind, xml) for name, (kind, xml) in parts.items() if xml}


def workbook_named_docx() -> bytes:
    """An Excel workbook renamed .docx: a package whose main part is xl/workbook.xml."""
    return zipped(
        {
            "_rels/.rels": relationships_xml(
                [("rId1", f"{REL}/officeDocument", "xl/workbook.xml")]
            ),
            "xl/workbook.xml": '<workbook xmlns="http://schemas.openxmlformats.org/'
            'spreadsheetml/2006/main"><sheets/></workbook>',
        }
    )


def word_online(
    *paragraphs: str, header: str = "", footer: str = "", footnote: str = "", comment: str = ""
) -> bytes:
    """A file as Word Online and SharePoint save it: the main part word/document2.xml."""
    parts = {"/word/styles.xml": (f"{REL}/styles", _STYLES, f"{_WML}.styles+xml")}
    parts |= {
        f"/word/{name}": (f"{REL}/{kind}", xml, f"{_WML}.{kind}+xml")
        for name, (kind, xml) in _optional_parts(header, footer, footnote, comment).items()
    }
    # Word Online's relationship ids are R and sixteen hex digits.
    ids = {name: f"R{hashlib.sha256(name.encode()).hexdigest()[:16]}" for name in parts}
    document = _document(
        "".join(paragraphs),
        ids.get("/word/header1.xml"),
        ids.get("/word/footer1.xml"),
    )
    members = {
        "[Content_Types].xml": content_types_xml(
            {"/word/document2.xml": MAIN} | {name: kind for name, (_, _, kind) in parts.items()}
        ),
        "_rels/.rels": relationships_xml(
            [
                ("Rb7a1c9e2f0d34a51", f"{REL}/officeDocument", "/word/document2.xml"),
                (
                    "R5e0f2a7c1b9d4e63",
                    f"{PACKAGE_REL}/metadata/core-properties",
                    "/docProps/core.xml",
                ),
            ]
        ),
        "word/document2.xml": document,
        "word/_rels/document2.xml.rels": relationships_xml(
            [(ids[name], type_, name) for name, (type_, _, _) in parts.items()]
        ),
        "docProps/core.xml": _CORE,
    }
    members |= {name.lstrip("/"): xml for name, (_, xml, _) in parts.items()}
    return zipped(members)


_CORE = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/'
    'core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title></dc:title>'
    "</cp:coreProperties>"
)


def libreoffice(
    *paragraphs: str,
    header: str = "",
    footer: str = "",
    footnote: str = "",
    comment: str = "",
    pages: int = 1,
) -> bytes:
    """A file as LibreOffice Writer saves it (File > Save As > Word 2007-365), stating
    `pages` pages."""
    relationships = [("rId1", f"{REL}/styles", "styles.xml")]
    members = {"word/styles.xml": _STYLES}
    overrides = {
        "/_rels/.rels": "application/vnd.openxmlformats-package.relationships+xml",
        "/word/_rels/document.xml.rels": "application/vnd.openxmlformats-package.relationships+xml",
        "/word/document.xml": MAIN,
        "/word/styles.xml": f"{_WML}.styles+xml",
        "/docProps/app.xml": f"{_OFFICE}.extended-properties+xml",
    }
    ids = {}
    for name, (kind, xml) in _optional_parts(header, footer, footnote, comment).items():
        ids[kind] = f"rId{len(relationships) + 1}"
        relationships.append((ids[kind], f"{REL}/{kind}", name))
        members[f"word/{name}"] = xml
        overrides[f"/word/{name}"] = f"{_WML}.{kind}+xml"
    relationships.append((f"rId{len(relationships) + 1}", f"{REL}/theme", "theme/theme1.xml"))
    app = (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        '<Properties xmlns="http://schemas.openxmlformats.org/officeDocument/2006/extended-'
        'properties"><Template></Template><TotalTime>1</TotalTime>'
        "<Application>LibreOffice/24.2.7.2$Linux_X86_64 LibreOffice_project/420$Build-2"
        f"</Application><AppVersion>15.0000</AppVersion><Pages>{pages}</Pages></Properties>"
    )
    return zipped(
        {
            "_rels/.rels": relationships_xml(
                [
                    ("rId1", f"{PACKAGE_REL}/metadata/core-properties", "docProps/core.xml"),
                    ("rId2", f"{REL}/extended-properties", "docProps/app.xml"),
                    ("rId3", f"{REL}/officeDocument", "word/document.xml"),
                ]
            ),
            "docProps/app.xml": app,
            "docProps/core.xml": _CORE,
            "word/_rels/document.xml.rels": relationships_xml(relationships),
            "word/document.xml": _document(
                "".join(paragraphs), ids.get("header"), ids.get("footer")
            ),
            "word/theme/theme1.xml": '<a:theme xmlns:a="http://schemas.openxmlformats.org/'
            'drawingml/2006/main" name="Office"/>',
            **members,
            "[Content_Types].xml": content_types_xml(overrides),
        }
    )


def _elements(xml: str) -> list:
    """The elements of a fragment of WordprocessingML, parsed as python-docx parses."""
    return list(etree.fromstring(f"<w:root {NAMESPACES}>{xml}</w:root>"))


def python_docx(*paragraphs: str, header: str = "", footer: str = "", comment: str = "") -> bytes:
    """A file as python-docx saves it, the markup added to its tree; python-docx writes
    no footnotes."""
    document = DocxDocument()
    body = document.element.body
    for element in _elements("".join(paragraphs)):
        body.sectPr.addprevious(element)
    section = document.sections[0]
    for story, xml in ((section.header, header), (section.footer, footer)):
        if xml:
            story.is_linked_to_previous = False
            story._element.remove(story.paragraphs[0]._p)
            for element in _elements(xml):
                story._element.append(element)
    if comment:
        document.add_comment(document.paragraphs[0].runs, text=comment, author="Reviewer")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


PRODUCERS = {"word-online": word_online, "libreoffice": libreoffice, "python-docx": python_docx}
