"""Word files whose main part is not word/document.xml (Word Online, SharePoint) are
accepted at upload, read through their relationships and found by search: upload,
the stages driven in this process, GET /api/v1/search."""

import pytest

from pipeline.models import ImportRun
from tests.support.docx_makers import (
    non_breaking_hyphen,
    paragraph,
    run,
    text_box,
    word_online,
    workbook_named_docx,
)
from tests.support.runs import drive
from tests.support.uploads import accepted_run, upload

pytestmark = pytest.mark.django_db


def _briefing() -> bytes:
    return word_online(
        paragraph(run("Vaccination briefing on COVID"), non_breaking_hyphen(), run("19 boosters.")),
        paragraph(run("See "), text_box(paragraph(run("Lighthouse clinic hours"))), run("below.")),
        header=paragraph(run("Harbourside health board")),
    )


def test_a_word_online_file_is_accepted_at_upload(api):
    response = upload(api, _briefing(), name="briefing.docx")

    assert response.status_code == 202, response.content
    run_ = ImportRun.objects.select_related("document").get(id=response.json()["run_id"])
    assert (run_.document.kind, run_.status) == ("docx", "queued")


@pytest.mark.django_db(transaction=True)  # the stages commit, as in a worker
def test_a_word_online_file_is_read_and_found_by_its_words(api):
    accepted = accepted_run(api, _briefing(), name="briefing.docx")

    assert drive(accepted.id).status == "succeeded"

    for query in ("covid", "COVID-19", "lighthouse", "harbourside"):
        results = api.get("/api/v1/search", {"q": query}).json()["results"]
        assert [hit["document_id"] for hit in results] == [str(accepted.document_id)], query
        assert results[0]["filename"] == "briefing.docx"


def test_an_excel_workbook_named_docx_is_refused_as_not_a_word_document(api):
    workbook = workbook_named_docx()

    response = upload(api, workbook, name="budget.docx")

    assert response.status_code == 415
    assert "not a Word document" in response.json()["detail"]
    assert not ImportRun.objects.exists()
