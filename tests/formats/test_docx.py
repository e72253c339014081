"""Word (.docx): what extraction reads, counts and charges, and how words are counted
(formats/docx.py). Pure functions on generated and crafted files; no database.
"""

import io

import pytest

from core.errors import UnreadableDocument
from documents import reading
from documents.reading import extract_limits, inspect_upload
from formats import docx, extract
from formats.base import PagesOverBudget
from tests.support import docx_makers, hostile
from tests.support.files import make_docx


def test_docx_garbage_is_unreadable(limits):
    with pytest.raises(UnreadableDocument):
        docx.extract(b"PK\x03\x04 not really a zip", limits=limits)


def test_a_docx_is_charged_by_its_words_when_it_states_fewer_pages(monkeypatch):
    monkeypatch.setattr(reading, "DOCX_WORDS_PER_PAGE", 500)

    extracted = docx.extract(
        hostile.docx_many_words(20_000, stated_pages=1), limits=extract_limits()
    )

    assert extracted.page_count == 40


def test_a_docx_is_charged_what_it_states_when_that_is_more(limits):
    extracted = docx.extract(make_docx(4, pages_property=3), limits=limits)

    assert extracted.page_count == 3
    assert extracted.text.startswith("Paragraph 1.")


def test_the_page_limit_applies_to_docx_at_extract(settings, monkeypatch):
    settings.PAPERLANE_MAX_PAGES_PER_DOCUMENT = 5
    monkeypatch.setattr(reading, "DOCX_WORDS_PER_PAGE", 100)

    with pytest.raises(UnreadableDocument, match="the most we accept is 5") as refused:
        docx.extract(hostile.docx_with_prefix(words=3000, prefix="ns0"), limits=extract_limits())
    assert refused.value.code == "too_many_pages"


def test_a_docx_over_its_page_budget_stops_as_soon_as_its_words_pass_it(monkeypatch):
    monkeypatch.setattr(reading, "DOCX_WORDS_PER_PAGE", 100)
    data = hostile.docx_many_words(20_000, stated_pages=1)  # 200 pages of words

    with pytest.raises(PagesOverBudget) as over:
        extract("docx", data, extract_limits(), page_budget=5)

    # Counting stopped at the sixth page, not at the two hundredth.
    assert (over.value.counted, over.value.budget, over.value.complete) == (6, 5, False)


def test_a_docx_stating_more_pages_than_its_budget_is_refused_before_its_text_is_read(limits):
    with pytest.raises(PagesOverBudget) as over:
        extract("docx", make_docx(1, pages_property=30), limits, page_budget=20)

    assert (over.value.counted, over.value.complete) == (30, False)


def test_a_document_with_more_text_than_the_limit_is_refused_naming_it(settings):
    settings.PAPERLANE_MAX_CHARS_PER_DOCUMENT = 1000

    with pytest.raises(UnreadableDocument, match="The document has more text") as refused:
        docx.extract(make_docx(20, words_per_paragraph=80), limits=extract_limits())
    assert "1,000 characters" in refused.value.message


def test_a_docx_whose_xml_is_broken_is_damaged_not_out_of_memory(limits):
    broken = hostile._replace_document_xml(make_docx(2), [b"<w:document><w:body><w:p>"])

    with pytest.raises(UnreadableDocument) as refused:
        docx.extract(broken, limits=limits)
    assert refused.value.code == "damaged_docx"


def _run(text: str) -> str:
    return f"<w:r><w:t xml:space='preserve'>{text}</w:t></w:r>"


def _cell(text: str) -> str:
    return f"<w:tc><w:p>{_run(text)}</w:p></w:tc>"


def test_docx_text_is_read_in_order_from_everything_word_shows(limits):
    body = (
        f"<w:p>{_run('First paragraph.')}</w:p>"
        # A content control, a tracked insertion and deletion, a field code.
        f"<w:sdt><w:sdtContent><w:p>{_run('Inside a control.')}</w:p></w:sdtContent></w:sdt>"
        f"<w:p><w:ins>{_run('Inserted')}</w:ins><w:del><w:r><w:delText>Deleted</w:delText>"
        f"</w:r></w:del><w:r><w:instrText>PAGE \\* MERGEFORMAT</w:instrText></w:r></w:p>"
        # A table with a nested table in its second cell.
        f"<w:tbl><w:tr>{_cell('A1')}<w:tc><w:p>{_run('B1')}</w:p><w:tbl><w:tr>{_cell('inner')}"
        f"{_cell('table')}</w:tr></w:tbl></w:tc></w:tr></w:tbl>"
        # A text box, drawn twice for readers old and new.
        f"<w:p><w:r><mc:AlternateContent><mc:Choice><w:txbxContent><w:p>{_run('Boxed')}</w:p>"
        f"</w:txbxContent></mc:Choice><mc:Fallback><w:txbxContent><w:p>{_run('Boxed')}</w:p>"
        f"</w:txbxContent></mc:Fallback></mc:AlternateContent></w:r>{_run('Anchor')}</w:p>"
        f"<w:p><w:r><w:t>Tab</w:t><w:tab/><w:t>stop</w:t></w:r></w:p>"
    )
    footnote = f"<w:p>{_run('A footnote.')}</w:p>"

    text = docx.extract(docx_makers.libreoffice(body, footnote=footnote), limits=limits).text

    assert text.split("\n\n") == [
        "First paragraph.",
        "Inside a control.",
        "Inserted",
        "A1\tB1\ninner\ttable",
        "Anchor",
        "Boxed",  # after the paragraph that anchors it
        "Tab\tstop",
        "A footnote.",
    ]


def count_words(text: str) -> int:
    counter = docx.WordCount()
    counter.feed(text)
    return counter.words


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("one two  three\tfour\n", 4),
        ("字" * 1000, 500),  # two ideographs make a word
        ("かな漢字 and words", 4),
        ("\u200b".join(["word"] * 240), 50),  # 1,199 letters with no space: 24 a word
    ],
    ids=["spaces", "ideographs", "mixed", "zero-width-joined"],
)
def test_words_are_counted_whether_or_not_the_script_uses_spaces(text, words):
    assert count_words(text) == words


def test_words_fed_in_pieces_count_as_the_whole_text():
    counter = docx.WordCount()
    for piece in ("Hel", "lo wor", "ld ", "", "字字", " again"):
        counter.feed(piece)

    assert counter.words == count_words("Hello world 字字 again") == 4


def test_a_docx_in_japanese_is_charged_for_its_text_not_its_spaces(monkeypatch):
    monkeypatch.setattr(reading, "DOCX_WORDS_PER_PAGE", 500)
    body = "".join(f"<w:p>{_run('日本語の文章です。' * 100)}</w:p>" for _ in range(20))

    extracted = docx.extract(hostile.docx_of_body(body), limits=extract_limits())

    # 18,000 characters without a space: 9,000 words, 18 pages.
    assert extracted.page_count == 18


@pytest.mark.parametrize("method", [None, 99], ids=["bad-deflate", "unknown-method"])
def test_a_docx_whose_body_cannot_be_inflated_is_damaged_not_a_crash(method, limits):
    data = hostile.docx_with_member_damaged("word/document.xml", method=method)

    for read in (
        lambda: inspect_upload(io.BytesIO(data)),
        lambda: docx.extract(data, limits=limits),
    ):
        with pytest.raises(UnreadableDocument) as refused:
            read()
        assert refused.value.code == "damaged_docx"


@pytest.mark.parametrize("method", [None, 99], ids=["bad-deflate", "unknown-method"])
def test_a_docx_whose_stated_pages_cannot_be_read_is_estimated_from_its_words(method, limits):
    data = hostile.docx_with_member_damaged("docProps/app.xml", method=method)

    assert inspect_upload(io.BytesIO(data)).pages == 1
    assert docx.extract(data, limits=limits).text == "Hello there"


def test_text_that_grows_when_normalised_is_held_to_the_limit_after_it_grows(settings):
    # U+FDFA is one character that NFKC writes as eighteen.
    settings.PAPERLANE_MAX_CHARS_PER_DOCUMENT = 100_000
    body = "".join(f"<w:p>{_run(chr(0xFDFA) * 1000)}</w:p>" for _ in range(10))

    with pytest.raises(UnreadableDocument) as refused:
        docx.extract(hostile.docx_of_body(body), limits=extract_limits())

    assert refused.value.code == "too_much_text"
