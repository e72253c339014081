"""File formats: text and real page counts (pure functions, no database)."""

import pytest
from pypdf import PageObject
from rq.timeouts import JobTimeoutException

from core.errors import UnreadableDocument
from documents.formats import docx, pdf
from tests.support.files import make_damaged_pdf, make_docx, make_encrypted_pdf, make_pdf


def test_pdf_extraction_reads_every_page_and_counts_them():
    seen = []

    extracted = pdf.extract(make_pdf(5), on_page=lambda done, total: seen.append((done, total)))

    assert extracted.page_count == 5
    assert all(f"Page {n}" in extracted.text for n in range(1, 6))
    assert seen[-1] == (5, 5)


def test_an_encrypted_pdf_is_unreadable_with_a_plain_reason():
    with pytest.raises(UnreadableDocument, match="password"):
        pdf.extract(make_encrypted_pdf())


def test_a_pdf_with_a_broken_page_tree_is_unreadable():
    with pytest.raises(UnreadableDocument, match="damaged"):
        pdf.extract(make_damaged_pdf(3))


def test_docx_extraction_uses_the_saved_page_count():
    extracted = docx.extract(make_docx(4, pages_property=3))

    assert extracted.page_count == 3
    assert extracted.text.startswith("Paragraph 1.")


def test_docx_garbage_is_unreadable():
    with pytest.raises(UnreadableDocument):
        docx.extract(b"PK\x03\x04 not really a zip")


def test_a_timeout_during_extraction_is_not_mistaken_for_damage(monkeypatch):
    def slow(self, *args, **kwargs):
        raise JobTimeoutException("took too long")

    monkeypatch.setattr(PageObject, "extract_text", slow)

    with pytest.raises(JobTimeoutException):
        pdf.extract(make_pdf(2))


def test_more_pages_than_allowed_is_unreadable_even_if_the_file_claimed_fewer(settings):
    settings.PAPERLANE_MAX_PAGES_PER_DOCUMENT = 3

    with pytest.raises(UnreadableDocument, match="the most we accept is 3"):
        pdf.extract(make_pdf(5))
