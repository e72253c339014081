"""Every passage of one document (retrieval/passages.py): a search of one document gives
each place its words are, in page order or best first, paged; a search across documents
says how many passages each document holds. On PostgreSQL, through the API and the page,
with a real 19-page PDF."""

import io
import re

import pypdfium2 as pdfium
import pytest
from pypdf import PdfReader, PdfWriter

from tests.support import real_world
from tests.support.files import one_page_pdf
from tests.support.runs import document_with_chunks, drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db

GEOBASE = "GeoBase_NHNC1_Data_Model_UML_EN.pdf"


def _search(client, q: str, **params):
    return client.get("/api/v1/search", {"q": q, **params})


def pages_holding(data: bytes, word: str) -> set[int]:
    """The pages whose text layer (read by PDFium) holds `word`."""
    document = pdfium.PdfDocument(data)
    return {
        number
        for number, page in enumerate(document, start=1)
        if re.search(rf"\b{word}\b", page.get_textpage().get_text_range(), re.IGNORECASE)
    }


def covered(results: list[dict]) -> set[int]:
    return {n for r in results for n in range(r["page_start"], r["page_end"] + 1)}


@pytest.mark.django_db(transaction=True)  # the stages commit, as in a worker
def test_a_word_on_many_pages_of_a_real_pdf_gives_every_page(api, member_client):
    data = (real_world.FOLDER / GEOBASE).read_bytes()
    wanted = pages_holding(data, "codelist")
    assert len(wanted) >= 7  # pages 10 and 12 to 18
    run = drive(accepted_run(api, data, name=GEOBASE).id)
    assert run.status == "succeeded", run.error_message
    document = str(run.document_id)

    body = _search(api, "codelist", document=document, order="page", limit=50).json()

    assert body["total"] == len(body["results"]) and not body["more"]
    assert wanted <= covered(body["results"])
    starts = [r["page_start"] for r in body["results"]]
    assert starts == sorted(starts)
    assert all(r["marks"] for r in body["results"])
    # Each lands on the page that holds its first marked word, within its pages (some
    # passages span two).
    assert any(r["page_start"] < r["page_end"] for r in body["results"])
    texts = [page.get_textpage().get_text_range().lower() for page in pdfium.PdfDocument(data)]
    for result in body["results"]:
        start, end = min(result["marks"])
        word = result["snippet"][start:end].lower()
        assert result["page_start"] <= result["page"] <= result["page_end"]
        assert word in texts[result["page"] - 1]
        assert all(word not in texts[n - 1] for n in range(result["page_start"], result["page"]))
    # Across documents: one result, which says how many passages hold the word.
    [hit] = _search(api, "codelist").json()["results"]
    assert hit["passages"] == body["total"] > 1
    # The page's "search this document" lists them all, each with its pages.
    page = member_client.get("/search/", {"q": "codelist", "document": document})
    shown = page.content.decode()
    assert shown.count('class="result-name"') == body["total"]
    assert f"{body['total']} passages found" in shown


def test_passages_come_best_first_or_in_page_order_and_are_paged(api, org):
    texts = [
        "a tide table",
        "nothing here",
        "tide and tide again: the tide table of the tide",
        "the harbour",
        "a tide",
    ]
    document = document_with_chunks(org, "tides.pdf", texts)

    by_page = _search(api, "tide", document=str(document.id), order="page").json()
    by_rank = _search(api, "tide", document=str(document.id), order="rank").json()
    first = _search(api, "tide", document=str(document.id), order="page", limit=2).json()
    rest = _search(api, "tide", document=str(document.id), order="page", limit=2, offset=2).json()

    assert [r["chunk_index"] for r in by_page["results"]] == [0, 2, 4]
    assert by_rank["results"][0]["chunk_index"] == 2  # the tide, four times over
    assert (first["total"], first["more"], rest["more"]) == (3, True, False)
    assert [r["chunk_index"] for r in first["results"] + rest["results"]] == [0, 2, 4]


def test_passages_holding_every_word_come_alone_and_some_words_when_none_does(api, org):
    document = document_with_chunks(
        org, "port.pdf", ["the harbour pilot", "a harbour", "a pilot", "the harbour pilot again"]
    )

    both = _search(api, "harbour pilot", document=str(document.id), order="page").json()
    some = _search(api, "harbour ferry", document=str(document.id), order="page").json()
    without = _search(api, "harbour -pilot", document=str(document.id), order="page").json()

    later = _search(
        api, "harbour ferry", document=str(document.id), order="page", limit=2, offset=2
    ).json()

    assert [r["chunk_index"] for r in both["results"]] == [0, 3]
    assert [r["chunk_index"] for r in some["results"]] == [0, 1, 3]
    assert [r["chunk_index"] for r in without["results"]] == [1]
    # The second page of those holding some of the words goes on with them.
    assert ([r["chunk_index"] for r in later["results"]], later["more"]) == ([3], False)


@pytest.mark.django_db(transaction=True)
def test_a_passage_spanning_two_pages_lands_on_the_one_holding_the_word(api):
    # Two short pages chunked together: the word is on the second only.
    writer = PdfWriter()
    for words in ("the ferry timetable for the summer", "the lighthouse keeper rows home"):
        content = f"BT /F1 12 Tf 72 720 Td ({words}) Tj ET".encode()
        writer.append(PdfReader(io.BytesIO(one_page_pdf(content))))
    out = io.BytesIO()
    writer.write(out)
    run = drive(accepted_run(api, out.getvalue(), name="two.pdf").id)
    assert run.status == "succeeded", run.error_message

    [hit] = _search(api, "lighthouse").json()["results"]

    assert (hit["page_start"], hit["page_end"], hit["page"]) == (1, 2, 2)
