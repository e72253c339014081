"""Public documents made by real software, and what Paperlane must make of each.

The files are in tests/fixtures/real_world/ (their sources and licences in SOURCES.md):
PDFs from Word, LibreOffice, WPS, pdfTeX, XeTeX, InDesign, Adobe's form designer,
AutoCAD, cairo, scanners, OCR and image converters, some damaged or encrypted; DOCX
files saved by Word. Generated files miss what these have: object streams, odd
encodings, ligatures, broken cross-reference tables, padding after the end.

Page counts were checked with poppler's `pdfinfo`, an independent reader, except
cyclic-toc.pdf, whose page tree poppler cannot count (its /Count is null; its one
page is there). A DOCX's pages are what Word stated in it (our words-per-page
estimate is lower for all of these).
"""

from dataclasses import dataclass, field
from pathlib import Path

FOLDER = Path(__file__).resolve().parents[1] / "fixtures" / "real_world"


@dataclass(frozen=True)
class RealDocument:
    name: str
    # Pages charged once processed; 0 for a file refused at accept or failing at extract.
    pages: int = 0
    # Phrases its extracted text must hold; none for scans and drawings without text.
    phrases: tuple[str, ...] = ()
    # The error code when the upload is refused (422) at accept...
    refused: str = ""
    # ...or when its run fails in the pipeline.
    fails: str = ""
    # The pages the accept path holds, when not those charged in the end.
    held: int | None = None
    # Pages whose text cannot be read; the rest of the document is processed.
    unreadable: tuple[int, ...] = ()
    notes: str = field(default="", compare=False)

    @property
    def data(self) -> bytes:
        return (FOLDER / self.name).read_bytes()

    @property
    def accepted(self) -> bool:
        return not self.refused

    @property
    def succeeds(self) -> bool:
        return not (self.refused or self.fails)


DOCUMENTS = [
    RealDocument("12s0324.pdf", 1, ("Table 324. Arrests by Sex and Age: 2009",)),
    RealDocument("AutoCad_Diagram.pdf", 1, ("Strip the cable",)),
    RealDocument("GeoBase_NHNC1_Data_Model_UML_EN.pdf", 19, ("National Hydro Network",)),
    RealDocument("SF424_page2.pdf", 1, ("Type of Applicant",)),
    RealDocument("Seige_of_Vicksburg_Sample_OCR.pdf", 6, ("VICKSBURG",)),
    RealDocument("badlin1.pdf", 30, ("Potato 0", "Potato 29")),
    RealDocument("campaign_donors.pdf", 1, ("MENA JUAN MARTÍN",)),
    RealDocument("congress-gray.pdf", 1, notes="a scanned page: no text"),
    # Page 3 is cut short: PDFium reads it as far as it goes, as poppler does.
    RealDocument("content-stream-errors.pdf", 4, ("Potato",)),
    # Typeset with ligatures: "misﬁts" is stored as "misfits".
    RealDocument("crazyones.pdf", 1, ("The Crazy Ones", "The misfits. The rebels.")),
    RealDocument("cyclic-toc.pdf", 1, held=2, notes="needs repair: estimated at accept"),
    RealDocument("data.pdf", 3, ("Mazda RX4",)),
    RealDocument("encrypted-file.pdf", refused="encrypted_pdf"),
    RealDocument("form_dd0293.pdf", 4, ("APPLICATION FOR THE REVIEW OF DISCHARGE",)),
    # "bar" is what was typed into its one text field.
    RealDocument("form_evince.pdf", 1, ("bar",)),
    # Japanese in a CID font: pypdf reads nothing of it.
    RealDocument("fpdf2_cjk.pdf", 1, ("日本語", "テキスト")),
    # Its one word, "Background", is drawn outside the page: no viewer shows it.
    RealDocument("imagemagick-images.pdf", 6, notes="images only"),
    RealDocument("indirect-rotation.pdf", 5, ("International Council of Containership",)),
    RealDocument("issue-297.pdf", 1, ("test example",)),
    RealDocument("issue-301.pdf", 1, notes="a scan with a little stray text"),
    RealDocument("libreoffice-form.pdf", 1, ("Example for a Form",)),
    RealDocument("libreoffice-writer-password.pdf", refused="encrypted_pdf"),
    RealDocument("multilang.pdf", 1, ("Hello World", "Привет, мир", "你好世界", "こんにちは世界")),
    RealDocument("outlines-with-invalid-destinations.pdf", 4, ("Hello, here is some text",)),
    # Encrypted with an owner password only: anyone may read it.
    RealDocument("r6-owner-password.pdf", 1, ("pdf encryption test",)),
    # 20 KB of NULs after its end-of-file marker.
    RealDocument("selenium-pypdf-issue-177.pdf", 1, ("Hello World",)),
    RealDocument("comments-rich-para.docx", 1, ("Some text worthy of note.",)),
    RealDocument("doc-word-default-blank.docx", 1),
    RealDocument("having-images.docx", 1),
    RealDocument("hdr-header-footer.docx", 2, ("section with header",)),
    RealDocument("par-hyperlinks.docx", 1, ("One awesome hyperlink.",)),
    RealDocument("sct-first-page-hdrftr.docx", 6, ("Page 6, Third page of section 2.",)),
    RealDocument("tbl-cell-access.docx", 1, ("7\t8\t9",)),
    RealDocument("tbl-having-applied-style.docx", 1, ("and a hearty foo to you too sir!",)),
    RealDocument("txt-font-props.docx", 1, ("Paragraph in ‘Large Size’ style.",)),
]
