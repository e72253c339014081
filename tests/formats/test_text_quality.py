"""Text a reader would recognise, from public real-world files (tests/fixtures/real_world,
SOURCES.md) where one shows the fault, else from a file made to show it: PDFium reads
PDFs, pypdf those PDFium cannot open; a Word file's every part is read."""

from formats import docx, pdf
from formats.base import Heading
from tests.support import hostile
from tests.support.files import make_overprinted_pdf, make_pdf
from tests.support.real_world import FOLDER


def read(name: str, limits):
    data = (FOLDER / name).read_bytes()
    module = docx if name.endswith(".docx") else pdf
    return module.extract(data, limits=limits)


def test_words_are_not_glued_to_the_numbers_beside_them(limits):
    # A table of donations; pypdf reads "09/10/2013EFECTIVO" in every row.
    extracted = read("campaign_donors.pdf", limits)

    assert "09/10/2013EFECTIVO" not in extracted.text
    assert extracted.text.count("09/10/2013 EFECTIVO") >= 10
    assert extracted.engine == "pdfium"


def test_adjacent_table_cells_stay_apart(limits):
    # AutoCAD's cable table; pypdf reads "M40x1.524.0" for the cells "M40x1.5" and "24.0".
    words = read("AutoCad_Diagram.pdf", limits).text.split()

    assert "M40x1.524.0" not in words and "M40x1.5" in words


def test_bold_made_by_printing_each_letter_twice_is_read_once(limits):
    text = pdf.extract(make_overprinted_pdf("Quarterly report"), limits=limits).text

    assert text == "Quarterly report"


def test_japanese_in_a_cid_font_is_read_without_stray_spaces(limits):
    assert read("fpdf2_cjk.pdf", limits).text.split() == ["日本語", "テキスト"]


def test_what_was_typed_into_form_fields_is_part_of_the_text(limits):
    assert read("form_evince.pdf", limits).text.splitlines()[-1] == "bar"
    text = read("libreoffice-form.pdf", limits).text
    assert "Alice" in text and "Bob" in text


def test_a_scanned_page_is_counted_as_a_page_without_text(limits):
    extracted = read("congress-gray.pdf", limits)

    assert (extracted.page_count, extracted.textless_pages, extracted.text) == (1, (1,), "")


def test_the_pages_without_text_are_named_among_those_with_it(limits):
    data = pdf.extract(make_pdf(3), limits=limits)
    assert data.textless_pages == ()
    assert read("imagemagick-images.pdf", limits).textless_pages == (1, 2, 3, 4, 5, 6)


def test_each_page_starts_where_the_page_offsets_say(limits):
    extracted = pdf.extract(make_pdf(3, label="Leaf"), limits=limits)

    assert len(extracted.page_starts) == 3
    for number, start in enumerate(extracted.page_starts, start=1):
        assert extracted.text[start:].startswith(f"Leaf {number}")


def test_the_outline_is_kept_as_section_titles_with_their_pages(limits):
    outline = read("outlines-with-invalid-destinations.pdf", limits).outline

    assert len(outline) == 9
    assert all(isinstance(heading, Heading) and heading.title for heading in outline)
    assert {heading.page for heading in outline} - {None} <= {1, 2, 3, 4}
    assert any(heading.page is not None for heading in outline)


def test_a_page_tree_holding_more_pages_than_it_states_is_read_by_pypdf(limits):
    # PDFium takes the stated count (1); the tree holds 40, and 40 are read and charged.
    extracted = pdf.extract(hostile.pdf_with_lying_count(real_pages=40, stated=1), limits=limits)

    assert (extracted.page_count, extracted.engine) == (40, "pypdf")
    assert len(extracted.page_starts) == 40


def test_a_word_files_headers_and_footers_are_read_once_each_after_the_body(limits):
    # Three sections; two of the six header and footer parts hold text.
    extracted = read("hdr-header-footer.docx", limits)
    blocks = extracted.text.split("\n\n")

    assert blocks[-2:] == ["Header for section-1", "Footer for section 1"]
    assert extracted.text.count("Header for section-1") == 1
    assert extracted.engine == "docx"


def test_first_page_and_default_headers_are_both_read(limits):
    text = read("sct-first-page-hdrftr.docx", limits).text

    assert text.endswith("Default (odd, primary) Header\n\nFirst Page Header (section 2)")


def test_a_word_files_comments_are_read_after_its_body(limits):
    blocks = read("comments-rich-para.docx", limits).text.split("\n\n")

    # The body ends with "Paragraph 7"; the comments on it follow, in order.
    assert blocks.index("Paragraph 7") < blocks.index(
        "Text with hyperlink https://google.com embedded."
    )
    assert blocks[-1] == "Paragraph with Heading 2 paragraph style."
