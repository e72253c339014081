"""A document's text a few pages at a time: which pages, and only their characters read."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from documents.selectors import document_text_window
from tests.support.members import document_with_text

pytestmark = pytest.mark.django_db


def test_a_window_reads_its_pages_and_not_the_length_of_the_whole_text(org):
    pages = [f"page {n} " + "x" * 1000 for n in range(1, 13)]
    document = document_with_text(org, pages)

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
    document = document_with_text(org, [f"page {n}\n" for n in range(1, 13)])

    window = document_text_window(document=document, first=first, count=10, page_chars=100)

    assert [page.number for page in window.pages] == [11, 12]
    assert window.pages[-1].text == "page 12\n"
