"""A document's text a few pages at a time: which pages, and only their characters read."""

import hashlib
import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from documents.formats.base import Extracted
from documents.models import Document
from documents.selectors import document_text_window
from documents.services.content import document_text_save

pytestmark = pytest.mark.django_db


def _document_of_pages(organisation, pages: list[str]) -> Document:
    """A document whose extracted text is `pages`, saved as the extract stage saves it."""
    document = Document.objects.create(
        organisation=organisation,
        filename="pages.pdf",
        kind="pdf",
        size_bytes=1,
        sha256=hashlib.sha256(b"pages").hexdigest(),
        storage_key=f"test/{uuid.uuid4()}.pdf",
    )
    starts, offset = [], 0
    for page in pages:
        starts.append(offset)
        offset += len(page)
    extracted = Extracted(text="".join(pages), page_count=len(pages), page_starts=tuple(starts))
    document_text_save(document=document, extracted=extracted)
    document.refresh_from_db()
    return document


def test_a_window_reads_its_pages_and_not_the_length_of_the_whole_text(org):
    pages = [f"page {n} " + "x" * 1000 for n in range(1, 13)]
    document = _document_of_pages(org, pages)

    with CaptureQueriesContext(connection) as queries:
        window = document_text_window(document=document, first=11, count=10, page_chars=50)

    assert [page.number for page in window.pages] == [11, 12]
    assert window.pages[0].text == pages[10][:50] and window.pages[0].cut == len(pages[10]) - 50
    assert window.pages[1].text == pages[11][:50]
    assert window.total == 12 and window.paged
    sql = " ".join(query["sql"] for query in queries.captured_queries).upper()
    assert "LENGTH(" not in sql


@pytest.mark.parametrize("first", [13, 999])
def test_a_first_page_past_the_end_opens_the_last_window(org, first):
    document = _document_of_pages(org, [f"page {n}\n" for n in range(1, 13)])

    window = document_text_window(document=document, first=first, count=10, page_chars=100)

    assert [page.number for page in window.pages] == [11, 12]
    assert window.pages[-1].text == "page 12\n"
