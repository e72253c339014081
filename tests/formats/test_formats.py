"""File formats: what accept learns within its budget, and what extraction counts and keeps.

Pure functions on generated, crafted and real-world files; no database.
"""

import io
import time
import zipfile

import pytest
from pypdf import PageObject, PdfWriter
from pypdf.generic import NameObject, NumberObject

from core.errors import UnreadableDocument, UnsupportedFileType, caused_by
from core.isolation import warm_up
from documents.reading import accept_limits, extract_limits, inspect_upload
from formats import docx, extract, pdf
from formats.base import (
    Deadline,
    DeadlinePassed,
    Inspection,
    PagesOverBudget,
    clean_extracted,
    too_slow,
)
from tests.support import hostile, real_world
from tests.support.files import make_damaged_pdf, make_docx, make_encrypted_pdf, make_pdf


@pytest.fixture
def limits():
    return extract_limits()


@pytest.fixture(autouse=True, scope="module")
def _fork_server():
    # The inspection runs in a child of the fork server; its start (once per process, at
    # a web process's start) is no part of the time an upload's inspection takes.
    warm_up()


# --- Extraction ----------------------------------------------------------------------------


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


def test_docx_garbage_is_unreadable(limits):
    with pytest.raises(UnreadableDocument):
        docx.extract(b"PK\x03\x04 not really a zip", limits=limits)


def test_a_passed_deadline_during_extraction_is_not_mistaken_for_damage(monkeypatch, limits):
    def slow(self, *args, **kwargs):
        raise too_slow(0.5)  # what Deadline.check raises

    monkeypatch.setattr(PageObject, "extract_text", slow)

    with pytest.raises(DeadlinePassed):
        pdf.read_with_pypdf(make_pdf(2), limits=limits)


@pytest.mark.parametrize("data", [make_pdf(3), make_docx(3)], ids=["pdf", "docx"])
def test_an_inspection_past_its_deadline_is_refused_as_too_slow_not_as_damage(data):
    kind = pdf if data.startswith(b"%PDF") else docx

    with pytest.raises(DeadlinePassed) as refused:
        kind.inspect(io.BytesIO(data), limits=accept_limits(), deadline=Deadline(-1))

    assert (refused.value.status_code, refused.value.code) == (422, "inspection_too_slow")


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


def test_a_docx_is_charged_by_its_words_when_it_states_fewer_pages(settings):
    settings.PAPERLANE_DOCX_WORDS_PER_PAGE = 500

    extracted = docx.extract(hostile.docx_many_words(20_000, stated_pages=1), limits=_limits())

    assert extracted.page_count == 40


def test_a_docx_is_charged_what_it_states_when_that_is_more(limits):
    extracted = docx.extract(make_docx(4, pages_property=3), limits=limits)

    assert extracted.page_count == 3
    assert extracted.text.startswith("Paragraph 1.")


def test_the_page_limit_applies_to_docx_at_extract(settings):
    settings.PAPERLANE_MAX_PAGES_PER_DOCUMENT = 5
    settings.PAPERLANE_DOCX_WORDS_PER_PAGE = 100

    with pytest.raises(UnreadableDocument, match="the most we accept is 5") as refused:
        docx.extract(hostile.docx_with_prefix(words=3000, prefix="ns0"), limits=_limits())
    assert refused.value.code == "too_many_pages"


def test_more_pages_than_allowed_is_unreadable_even_if_the_file_claimed_fewer(settings):
    settings.PAPERLANE_MAX_PAGES_PER_DOCUMENT = 3

    with pytest.raises(UnreadableDocument, match="the most we accept is 3"):
        pdf.extract(hostile.pdf_with_lying_count(real_pages=5, stated=1), limits=_limits())


def test_a_page_with_more_text_than_the_limit_is_refused_naming_it(settings):
    settings.PAPERLANE_MAX_CHARS_PER_PAGE = 100

    with pytest.raises(UnreadableDocument, match="Page 1 has more text") as refused:
        pdf.extract(make_pdf(2, words_per_page=100), limits=_limits())
    assert "100 characters" in refused.value.message


def test_a_pdf_over_its_page_budget_is_refused_once_counted_before_any_text(limits, monkeypatch):
    read = []
    monkeypatch.setattr(PageObject, "extract_text", lambda page, *a, **k: read.append(page))

    with pytest.raises(PagesOverBudget) as over:
        extract("pdf", make_pdf(3), limits, page_budget=2)

    assert (over.value.counted, over.value.budget, over.value.complete) == (3, 2, True)
    assert read == []
    assert extract("pdf", make_pdf(3), limits, page_budget=3).page_count == 3


def test_a_docx_over_its_page_budget_stops_as_soon_as_its_words_pass_it(settings):
    settings.PAPERLANE_DOCX_WORDS_PER_PAGE = 100
    data = hostile.docx_many_words(20_000, stated_pages=1)  # 200 pages of words

    with pytest.raises(PagesOverBudget) as over:
        extract("docx", data, _limits(), page_budget=5)

    # Counting stopped at the sixth page, not at the two hundredth.
    assert (over.value.counted, over.value.budget, over.value.complete) == (6, 5, False)


def test_a_docx_stating_more_pages_than_its_budget_is_refused_before_its_text_is_read(limits):
    with pytest.raises(PagesOverBudget) as over:
        extract("docx", make_docx(1, pages_property=30), limits, page_budget=20)

    assert (over.value.counted, over.value.complete) == (30, False)


# --- Accept: bounded inspection ---------------------------------------------------------


def test_a_docx_of_unclosed_text_tags_is_answered_in_well_under_a_second():
    crafted = hostile.docx_quadratic_text_runs(24_000)  # about 20 s with the old regex

    started = time.monotonic()
    with pytest.raises(UnreadableDocument) as refused:
        inspect_upload(io.BytesIO(crafted))
    assert time.monotonic() - started < 1
    assert refused.value.code == "damaged_docx"


def test_a_zip_with_a_huge_directory_is_refused_from_its_end_record():
    crafted = hostile.zip_with_huge_directory(100_000)

    started = time.monotonic()
    with pytest.raises(UnreadableDocument) as refused:
        inspect_upload(io.BytesIO(crafted))
    assert time.monotonic() - started < 0.2
    assert refused.value.code == "docx_too_large"


def test_a_pdf_the_strict_parser_refuses_is_estimated_not_repaired_at_accept():
    broken = hostile.pdf_with_broken_startxref(size_mb=10)

    started = time.monotonic()
    inspection = inspect_upload(io.BytesIO(broken))

    assert time.monotonic() - started < 1
    assert (inspection.kind, inspection.pages, inspection.estimated) == ("pdf", 100, True)


@pytest.mark.parametrize(
    "build",
    [hostile.pdf_needing_xref_rebuild, hostile.pdf_with_root_not_a_catalog],
    ids=["xref-rebuild", "root-search"],
)
def test_a_pdf_strict_mode_would_repair_is_estimated_without_inflating_its_streams(build):
    # pypdf's strict reader repairs these itself, inflating every object stream (each
    # 10 MB here): seconds of CPU in the request, then the deadline refused them.
    inspection = inspect_upload(io.BytesIO(build()))

    assert (inspection.pages, inspection.estimated) == (1, True)


def _inspect_timed(data: bytes) -> tuple[Inspection | UnreadableDocument, float]:
    started = time.monotonic()
    try:
        result = inspect_upload(io.BytesIO(data))
    except UnreadableDocument as refused:
        result = refused
    return result, time.monotonic() - started


def test_a_cross_reference_stream_declaring_two_million_entries_is_refused_within_a_second():
    crafted = hostile.pdf_with_huge_xref_stream(2_000_000)  # 4 to 12 s of pypdf before
    assert len(crafted) < 16_000

    refused, elapsed = _inspect_timed(crafted)

    assert elapsed < 1
    assert isinstance(refused, UnreadableDocument)
    assert refused.status_code == 422
    assert refused.as_dict() == {"detail": refused.message, "code": "pdf_too_complex"}
    assert "2,000,000 objects" in refused.message and "500,000" in refused.message


def test_a_cross_reference_table_listing_more_objects_than_the_limit_is_refused(settings):
    settings.PAPERLANE_PDF_MAX_OBJECTS = 100_000
    # Two subsections of 60,000: the whole table counts, not its first subsection.
    data = hostile.pdf_with_long_xref_table(120_000)
    head, _, tail = data.partition(b"xref\n0 120000\n")
    first, rest = tail[: 60_000 * 20], tail[60_000 * 20 :]
    split = head + b"xref\n0 60000\n" + first + b"60000 60000\n" + rest

    refused, elapsed = _inspect_timed(split)

    assert (refused.code, elapsed < 1) == ("pdf_too_complex", True)
    assert "120,000 objects" in refused.message and "100,000" in refused.message


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda: hostile.pdf_with_xref_stream_bomb(200_000_000), "estimated"),
        (lambda: hostile.pdf_with_deep_nesting(200_000), "estimated"),
        (lambda: hostile.pdf_with_huge_page_count(10**15), "too_many_pages"),
        (lambda: hostile.pdf_with_huge_object_stream(10, declared=10**9), "pdf_too_complex"),
        (lambda: hostile.pdf_with_huge_object_stream(20_000), "pdf_too_complex"),
        (lambda: hostile.pdf_with_long_xref_chain(5_000), "pdf_too_complex"),
    ],
    ids=[
        "flate-bomb-in-xref-stream",
        "deeply-nested-arrays",
        "huge-count",
        "object-stream-lying-about-its-n",
        "object-stream-of-20000",
        "5000-xref-sections",
    ],
)
def test_a_hostile_pdf_is_answered_at_once_without_the_work_it_asks_for(build, expected):
    result, elapsed = _inspect_timed(build())

    assert elapsed < 1
    if expected == "estimated":
        assert (result.pages, result.estimated) == (1, True)
    else:
        assert (result.status_code, result.code) == (422, expected)


def test_what_the_bounds_do_not_foresee_ends_on_the_wall_clock(settings):
    # 20 MB of spaces after the catalog: pypdf reads them one at a time looking for a
    # `stream` keyword, about 14 s in the request; the child is killed at the budget.
    settings.PAPERLANE_ACCEPT_INSPECT_SECONDS = 0.5
    crafted = hostile.pdf_with_padded_catalog(20_000_000)

    refused, elapsed = _inspect_timed(crafted)

    assert elapsed < 0.5 + 0.4
    assert (refused.status_code, refused.code) == (422, "inspection_too_slow")
    assert "0.5 seconds" in refused.message
    # The next upload has a child of its own, and is answered as ever.
    assert inspect_upload(io.BytesIO(make_pdf(3))).pages == 3


def test_an_inspection_over_its_memory_is_refused_at_once_not_a_crash(settings):
    # The child starts with about 130 MB of address space; the 450,000 entries of this
    # cross-reference stream need some 60 MB more.
    settings.PAPERLANE_ACCEPT_INSPECT_MEMORY_MB = 100
    result, elapsed = _inspect_timed(hostile.pdf_with_huge_xref_stream(450_000))

    assert (result.status_code, result.code) == (422, "inspection_too_large")
    assert elapsed < 1


def test_a_docx_without_stated_pages_is_estimated_from_its_words_in_any_prefix(settings):
    settings.PAPERLANE_DOCX_WORDS_PER_PAGE = 100
    data = _without_app_xml(hostile.docx_with_prefix(words=3000, prefix="ns0"))

    inspection = inspect_upload(io.BytesIO(data))

    assert (inspection.kind, inspection.pages, inspection.estimated) == ("docx", 30, True)


def test_words_beyond_the_xml_budget_are_extrapolated(settings):
    settings.PAPERLANE_DOCX_WORDS_PER_PAGE = 100
    data = make_docx(200, words_per_paragraph=80)  # 200 x 82 words, no stated pages

    settings.PAPERLANE_ACCEPT_DOCX_XML_BUDGET_BYTES = 10_000_000
    counted = inspect_upload(io.BytesIO(data)).pages
    settings.PAPERLANE_ACCEPT_DOCX_XML_BUDGET_BYTES = 20_000
    extrapolated = inspect_upload(io.BytesIO(data)).pages

    assert counted == 164
    assert 0.7 * counted <= extrapolated <= 1.3 * counted


def test_a_zip_that_is_not_a_word_document_is_unsupported():
    with pytest.raises(UnsupportedFileType):
        inspect_upload(io.BytesIO(hostile._zip({"hello.txt": b"hello"})))


def _ample() -> Deadline:
    return Deadline(10)


def _limits():
    return extract_limits()


def _without_app_xml(data: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            if info.filename != "docProps/app.xml":
                target.writestr(info, source.read(info))
    return out.getvalue()


def test_a_document_with_more_text_than_the_limit_is_refused_naming_it(settings):
    settings.PAPERLANE_MAX_CHARS_PER_DOCUMENT = 1000

    with pytest.raises(UnreadableDocument, match="The document has more text") as refused:
        docx.extract(make_docx(20, words_per_paragraph=80), limits=_limits())
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
    footnotes = f"<w:footnote><w:p>{_run('A footnote.')}</w:p></w:footnote>"

    text = docx.extract(hostile.docx_of_body(body, footnotes=footnotes), limits=limits).text

    assert text.split("\n\n") == [
        "First paragraph.",
        "Inside a control.",
        "Inserted",
        "A1\tB1\ninner\ttable",
        "Boxed",
        "Anchor",
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


def test_a_docx_in_japanese_is_charged_for_its_text_not_its_spaces(settings):
    settings.PAPERLANE_DOCX_WORDS_PER_PAGE = 500
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


# --- Public documents made by real software (tests/support/real_world.py) ------------------

READABLE = [d for d in real_world.DOCUMENTS if d.succeeds]
UNREADABLE = [d for d in real_world.DOCUMENTS if not d.succeeds]


@pytest.mark.parametrize("document", READABLE, ids=lambda d: d.name)
def test_a_real_document_is_read_for_its_real_pages_and_text(document, limits):
    inspection = inspect_upload(io.BytesIO(document.data))

    extracted = extract(inspection.kind, document.data, limits)

    assert inspection.pages == (document.held or document.pages)
    assert extracted.page_count == document.pages
    assert extracted.unreadable_pages == document.unreadable
    for phrase in document.phrases:
        assert phrase in extracted.text
    assert clean_extracted(extracted.text) == extracted.text  # nothing PostgreSQL refuses


@pytest.mark.parametrize("document", UNREADABLE, ids=lambda d: d.name)
def test_a_real_document_that_cannot_be_processed_says_why(document, limits):
    with pytest.raises(UnreadableDocument) as error:
        inspection = inspect_upload(io.BytesIO(document.data))
        assert inspection.pages == document.held
        extract(inspection.kind, document.data, limits)

    assert error.value.code == (document.refused or document.fails)


def test_padding_after_the_end_of_file_marker_is_not_a_cut_off_file():
    # Found in the wild: a browser's PDF with 20 KB of NULs after %%EOF.
    padded = make_pdf(2) + b"\x00" * 3_000_000 + b"\r\n \t"

    assert inspect_upload(io.BytesIO(padded)).pages == 2
    with pytest.raises(UnreadableDocument, match="incomplete"):
        inspect_upload(io.BytesIO(make_pdf(2)[:-200] + b"\x00" * 5000))


def test_typeset_ligatures_and_full_width_forms_are_stored_as_plain_letters():
    assert clean_extracted("The misﬁts ｆｕｌｌ\r\nwidth\x00") == "The misfits full\nwidth"
