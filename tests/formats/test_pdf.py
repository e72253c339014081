"""PDF: what extraction reads, counts and refuses (formats/pdf.py), and the page count
the accept path reads. Pure functions on generated and crafted files; no database.
"""

import io

import pytest
from pypdf import PageObject, PdfWriter
from pypdf.generic import NameObject, NumberObject

from core.errors import UnreadableDocument, caused_by
from documents import reading
from documents.reading import accept_limits, extract_limits
from formats import extract, pdf
from formats.base import Deadline, DeadlinePassed, PagesOverBudget, too_slow
from tests.support import hostile
from tests.support.files import make_damaged_pdf, make_encrypted_pdf, make_pdf


def test_pdf_extraction_reads_every_page_and_counts_them(limits):
    seen = []

    extracted = pdf.extract(make_pdf(5), limits=limits, on_page=lambda *p: seen.append(p))

    assert extracted.page_count == 5
    assert all(f"Page {n}" in extracted.text for n in range(1, 6))
    assert seen[-1] == (5, 5)


def test_an_encrypted_pdf_is_unreadable_with_a_plain_reason(limits):
    with pytest.raises(UnreadableDocument, match="password"):
        pdf.extract(make_encrypted_pdf(), limits=limits)


def test_pdfium_reads_a_cut_off_page_as_far_as_it_goes(limits):
    extracted = pdf.extract(make_pdf(4, broken_pages={2, 4}), limits=limits)

    assert (extracted.page_count, extracted.unreadable_pages, extracted.engine) == (4, (), "pdfium")
    assert all(f"Page {n}" in extracted.text for n in range(1, 5))


def test_a_file_pdfium_cannot_open_is_read_by_pypdf(limits):
    extracted = pdf.extract(make_pdf(3, trailer_root=False), limits=limits)

    assert (extracted.page_count, extracted.engine) == (3, "pypdf")
    assert all(f"Page {n}" in extracted.text for n in range(1, 4))


def test_a_page_that_cannot_be_read_is_left_out_and_named_and_the_rest_is_read(limits):
    data = make_pdf(4, broken_pages={2, 4}, trailer_root=False)  # read by pypdf

    extracted = pdf.extract(data, limits=limits)

    assert (extracted.page_count, extracted.unreadable_pages) == (4, (2, 4))
    assert "Page 1" in extracted.text and "Page 3" in extracted.text
    assert "Page 2" not in extracted.text


def test_a_pdf_none_of_whose_pages_can_be_read_is_damaged(limits):
    with pytest.raises(UnreadableDocument, match="pages could not be read") as refused:
        pdf.extract(make_pdf(2, broken_pages={1, 2}, trailer_root=False), limits=limits)

    assert refused.value.code == "damaged_pdf"


def test_running_out_of_memory_on_a_page_is_not_taken_for_a_damaged_page(limits, monkeypatch):
    def out_of_memory(page, *args, **kwargs):
        try:
            raise MemoryError
        except MemoryError as exc:
            raise ValueError("the parser wraps what it meets") from exc

    monkeypatch.setattr(PageObject, "extract_text", out_of_memory)

    with pytest.raises(ValueError) as raised:
        pdf.read_with_pypdf(make_pdf(2), limits=limits)

    assert caused_by(raised.value, MemoryError)


def test_a_pdf_with_a_broken_page_tree_is_unreadable(limits):
    with pytest.raises(UnreadableDocument, match="damaged"):
        pdf.extract(make_damaged_pdf(3), limits=limits)


def test_a_passed_deadline_during_extraction_is_not_mistaken_for_damage(monkeypatch, limits):
    def slow(self, *args, **kwargs):
        raise too_slow(0.5)  # what Deadline.check raises

    monkeypatch.setattr(PageObject, "extract_text", slow)

    with pytest.raises(DeadlinePassed):
        pdf.read_with_pypdf(make_pdf(2), limits=limits)


def test_extracted_text_keeps_no_nul_or_control_characters(limits):
    extracted = pdf.extract(hostile.pdf_with_nul_text(2), limits=limits)

    assert "Page" in extracted.text
    assert not any(ord(c) < 32 and c not in "\n\t" for c in extracted.text)
    assert "\x7f" not in extracted.text


def test_a_pdf_is_counted_by_its_real_pages_whatever_its_count_says(limits):
    lying = hostile.pdf_with_lying_count(real_pages=40, stated=1)

    assert pdf.inspect(io.BytesIO(lying), limits=accept_limits(), deadline=_ample()).pages == 1
    assert pdf.extract(lying, limits=limits).page_count == 40


def _saved_over_itself(data: bytes) -> bytes:
    """`data` with its second page rotated and written again (an incremental update)."""
    writer = PdfWriter(io.BytesIO(data), incremental=True)
    writer.pages[1][NameObject("/Rotate")] = NumberObject(90)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


@pytest.mark.parametrize(
    "data, pages",
    [
        (hostile.pdf_with_pages_in_an_object_stream(real_pages=40), 40),
        (_saved_over_itself(make_pdf(3)), 3),
    ],
    ids=["pages-in-an-object-stream", "a-page-written-twice"],
)
def test_a_count_its_page_objects_confirm_stands_without_walking_the_tree(
    data, pages, limits, monkeypatch
):
    class Walked(BaseException):  # not an Exception: pypdf's failures are caught
        pass

    def walk(*args, **kwargs):
        raise Walked("the page tree was walked")

    monkeypatch.setattr(pdf, "PdfReader", walk)

    extracted = pdf.extract(data, limits=limits)

    assert (extracted.page_count, extracted.engine) == (pages, "pdfium")


def test_a_lying_count_is_found_when_the_pages_are_in_an_object_stream(limits):
    lying = hostile.pdf_with_pages_in_an_object_stream(real_pages=40, stated=1)

    extracted = pdf.extract(lying, limits=limits)

    assert (extracted.page_count, extracted.engine) == (40, "pypdf")
    assert extracted.text.split("\n\n")[-1] == "Page 40"


def test_more_pages_than_allowed_is_unreadable_even_if_the_file_claimed_fewer(settings):
    settings.PAPERLANE_MAX_PAGES_PER_DOCUMENT = 3

    with pytest.raises(UnreadableDocument, match="the most we accept is 3"):
        pdf.extract(hostile.pdf_with_lying_count(real_pages=5, stated=1), limits=extract_limits())


def test_a_page_with_more_text_than_the_limit_is_refused_naming_it(monkeypatch):
    monkeypatch.setattr(reading, "MAX_CHARS_PER_PAGE", 100)

    with pytest.raises(UnreadableDocument, match="Page 1 has more text") as refused:
        pdf.extract(make_pdf(2, words_per_page=100), limits=extract_limits())
    assert "100 characters" in refused.value.message


def test_a_pdf_over_its_page_budget_is_refused_once_counted_before_any_text(limits, monkeypatch):
    read = []
    monkeypatch.setattr(PageObject, "extract_text", lambda page, *a, **k: read.append(page))

    with pytest.raises(PagesOverBudget) as over:
        extract("pdf", make_pdf(3), limits, page_budget=2)

    assert (over.value.counted, over.value.budget, over.value.complete) == (3, 2, True)
    assert read == []
    assert extract("pdf", make_pdf(3), limits, page_budget=3).page_count == 3


def _ample() -> Deadline:
    return Deadline(10)
