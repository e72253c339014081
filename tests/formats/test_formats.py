"""File formats at accept: what the inspection of an upload learns within its budget,
in its bounded child (documents.reading.inspect_upload, as the accept path calls it);
and public documents made by real software, from accept to extraction. No database.
"""

import io
import re
import time
import zipfile

import pytest

from core.errors import UnreadableDocument, UnsupportedFileType
from core.isolation import warm_up
from documents import reading
from documents.reading import accept_limits, inspect_upload
from formats import docx, extract, pdf
from formats.base import Deadline, DeadlinePassed, Inspection, clean_extracted
from tests.support import hostile, real_world
from tests.support.files import make_docx, make_pdf


@pytest.fixture(autouse=True, scope="module")
def _fork_server():
    # The inspection runs in a child of the fork server; its start (once per process, at
    # a web process's start) is no part of the time an upload's inspection takes.
    warm_up()


# --- Accept: bounded inspection ---------------------------------------------------------


@pytest.mark.parametrize("data", [make_pdf(3), make_docx(3)], ids=["pdf", "docx"])
def test_an_inspection_past_its_deadline_is_refused_as_too_slow_not_as_damage(data):
    kind = pdf if data.startswith(b"%PDF") else docx

    with pytest.raises(DeadlinePassed) as refused:
        kind.inspect(io.BytesIO(data), limits=accept_limits(), deadline=Deadline(-1))

    assert (refused.value.status_code, refused.value.code) == (422, "inspection_too_slow")


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


def test_a_cross_reference_table_listing_more_objects_than_the_limit_is_refused(monkeypatch):
    monkeypatch.setattr(reading, "PDF_MAX_OBJECTS", 100_000)
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


@pytest.mark.parametrize(
    "build",
    [
        lambda: hostile.pdf_with_long_xref_table(500_000, damaged_unused=True),
        lambda: hostile.pdf_with_huge_xref_stream(500_000, unused_kind=7),
    ],
    ids=["table", "stream"],
)
def test_a_pdf_listing_500000_objects_is_read_without_reading_the_entries_it_does_not_need(
    build,
):
    # Every entry but those of the catalog, the page tree and the page is junk: a reader
    # that read them all would refuse the table (or repair it), and take seconds doing so.
    result, elapsed = _inspect_timed(build())

    assert isinstance(result, Inspection), result
    assert (result.pages, result.estimated, elapsed < 1) == (1, False, True)


def test_a_valid_pdf_padded_with_45_mb_of_nuls_is_accepted_at_once():
    result, elapsed = _inspect_timed(make_pdf(2) + bytes(45_000_000))

    assert isinstance(result, Inspection), result
    assert (result.pages, result.estimated, elapsed < 1) == (2, False, True)


def test_a_word_file_of_190_mb_of_empty_paragraphs_is_refused_within_a_second():
    crafted = hostile.docx_of_empty_paragraphs(190, stated_pages=1)
    assert len(crafted) < 400_000

    refused, elapsed = _inspect_timed(crafted)

    assert isinstance(refused, UnreadableDocument), refused
    assert (refused.status_code, refused.code, elapsed < 1) == (422, "docx_too_compressed", True)
    assert "word/document.xml" in refused.message


def test_a_word_file_is_charged_for_its_markup_when_it_weighs_more_than_its_words(monkeypatch):
    # About 4.7 MiB of paragraphs with no word in them, compressing as Word's markup does.
    crafted = hostile.docx_of_heavy_markup(4.5, stated_pages=1)
    parsed = re.compile(
        r"word/(document|styles|comments|footnotes|endnotes|header\d*|footer\d*)\.xml"
    )
    with zipfile.ZipFile(io.BytesIO(crafted)) as archive:
        markup = sum(
            info.file_size for info in archive.infolist() if parsed.fullmatch(info.filename)
        )
    expected = -(-markup // reading.DOCX_MARKUP_BYTES_PER_PAGE)

    inspection = inspect_upload(io.BytesIO(crafted))
    extracted = extract("docx", crafted, reading.extract_limits())

    assert expected >= 5
    assert (inspection.pages, extracted.page_count) == (expected, expected)


def test_what_the_bounds_do_not_foresee_ends_on_the_wall_clock(monkeypatch):
    # 20 MB of spaces after the catalog: pypdf reads them one at a time looking for a
    # `stream` keyword, about 14 s in the request; the child is killed at the budget.
    monkeypatch.setattr(reading, "INSPECT_SECONDS", 0.5)
    crafted = hostile.pdf_with_padded_catalog(20_000_000)

    refused, elapsed = _inspect_timed(crafted)

    assert elapsed < 0.5 + 0.4
    assert (refused.status_code, refused.code) == (422, "inspection_too_slow")
    assert "0.5 seconds" in refused.message
    # The next upload has a child of its own, and is answered as ever.
    assert inspect_upload(io.BytesIO(make_pdf(3))).pages == 3


def test_an_inspection_over_its_memory_is_refused_at_once_not_a_crash(monkeypatch):
    # The child starts with about 130 MB of address space; the 450,000 entries of this
    # cross-reference stream need some 60 MB more.
    monkeypatch.setattr(reading, "INSPECT_MEMORY_MB", 100)
    result, elapsed = _inspect_timed(hostile.pdf_with_huge_xref_stream(450_000))

    assert (result.status_code, result.code) == (422, "inspection_too_large")
    assert elapsed < 1


def test_a_docx_without_stated_pages_is_estimated_from_its_words_in_any_prefix(monkeypatch):
    monkeypatch.setattr(reading, "DOCX_WORDS_PER_PAGE", 100)
    data = _without_app_xml(hostile.docx_with_prefix(words=3000, prefix="ns0"))

    inspection = inspect_upload(io.BytesIO(data))

    assert (inspection.kind, inspection.pages, inspection.estimated) == ("docx", 30, True)


def test_words_beyond_the_xml_budget_are_extrapolated(monkeypatch):
    monkeypatch.setattr(reading, "DOCX_WORDS_PER_PAGE", 100)
    data = make_docx(200, words_per_paragraph=80)  # 200 x 82 words, no stated pages

    monkeypatch.setattr(reading, "DOCX_XML_BUDGET_BYTES", 10_000_000)
    counted = inspect_upload(io.BytesIO(data)).pages
    monkeypatch.setattr(reading, "DOCX_XML_BUDGET_BYTES", 20_000)
    extrapolated = inspect_upload(io.BytesIO(data)).pages

    assert counted == 164
    assert 0.7 * counted <= extrapolated <= 1.3 * counted


def test_a_zip_that_is_not_a_word_document_is_unsupported():
    with pytest.raises(UnsupportedFileType):
        inspect_upload(io.BytesIO(hostile.zipped({"hello.txt": b"hello"})))


def _without_app_xml(data: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            if info.filename != "docProps/app.xml":
                target.writestr(info, source.read(info))
    return out.getvalue()


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
