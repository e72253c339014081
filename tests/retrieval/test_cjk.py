"""Chinese, Japanese and Korean: a part of a phrase finds its document (each run of their
characters is indexed and searched as its pairs of characters), in real PDFs and in a Word
file, with the part marked in the snippet and on the page; other scripts as before."""

import io

import pytest
from docx import Document as DocxDocument

from core.cjk import bigrams, spans, with_bigrams
from retrieval.marks import marked_pages
from retrieval.query import parse
from tests.support.real_world import FOLDER
from tests.support.runs import document_with_chunks, drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db


def test_runs_of_cjk_characters_are_read_as_their_pairs():
    assert bigrams("你好世界") == ["你好", "好世", "世界"]
    assert bigrams("世") == ["世"]
    assert with_bigrams("PDF文件 and こんにちは.") == "PDF 文件  and  こん んに にち ちは ."
    assert with_bigrams("Hello, Привет") is None
    assert parse("世界").clauses == ((("世界",),),)
    assert parse("你好世界 report").clauses == ((("你好", "好世", "世界"),), (("report",),))
    assert parse('"PDF文件"').clauses == ((("pdf", "文件"),),)


def test_the_pairs_of_a_query_mark_the_run_they_come_from_whole():
    assert spans("你好世界，世界", ["你好", "好世", "世界"]) == [(0, 4), (5, 7)]
    assert spans("hello world", ["hello"]) == []  # other scripts: marked by their stems


def _search(client, q: str, **params):
    return client.get("/api/v1/search", {"q": q, **params}).json()


def _marked(hit) -> list[str]:
    return [hit["snippet"][start:end] for start, end in hit["marks"]]


def _docx(*paragraphs: str) -> bytes:
    document = DocxDocument()
    for text in paragraphs:
        document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


@pytest.mark.django_db(transaction=True)  # the stages commit, as in a worker
def test_a_part_of_a_cjk_phrase_finds_real_pdfs_and_a_word_file(api):
    documents = {}
    for name, data in (
        ("multilang.pdf", (FOLDER / "multilang.pdf").read_bytes()),
        ("fpdf2_cjk.pdf", (FOLDER / "fpdf2_cjk.pdf").read_bytes()),
        ("notes.docx", _docx("会議の議事録", "서울특별시 교통 정보", "Latin words stay words")),
    ):
        run = accepted_run(api, data, name=name)
        assert drive(run.id).status == "succeeded"
        documents[str(run.document_id)] = name

    def found(q: str) -> list[str]:
        return sorted(documents[hit["document_id"]] for hit in _search(api, q)["results"])

    assert found("世界") == ["multilang.pdf"]  # of 你好世界 and こんにちは世界
    assert found("こんにちは") == ["multilang.pdf"]
    assert found("你好世界") == ["multilang.pdf"]
    assert found("本語") == ["fpdf2_cjk.pdf"]  # of 日本語
    assert found("議事") == ["notes.docx"]  # of 会議の議事録
    assert found("특별") == ["notes.docx"]  # of 서울특별시
    assert found("好你") == []  # the same characters in another order
    assert found("latin") == ["notes.docx"]

    [hit] = _search(api, "世界")["results"]
    assert set(_marked(hit)) == {"世界"}
    [hit] = _search(api, "会議 議事録")["results"]
    assert _marked(hit) == ["会議", "議事録"]


def test_the_page_marks_a_part_of_a_cjk_phrase(org):
    pages = marked_pages(["你好世界 and the world", "nothing"], "世界 world")

    assert [(piece.text, piece.marked) for piece in pages[0]] == [
        ("你好", False),
        ("世界", True),
        (" and the ", False),
        ("world", True),
    ]
    assert [piece.marked for piece in pages[1]] == [False]


def test_a_chunk_of_cjk_is_found_by_part_beside_other_organisations(api, org, other_org):
    ours = document_with_chunks(org, "ours.pdf", ["东京的天气很好"])
    document_with_chunks(other_org, "theirs.pdf", ["东京的天气很好"])

    results = _search(api, "天气")["results"]

    assert [hit["document_id"] for hit in results] == [str(ours.id)]
