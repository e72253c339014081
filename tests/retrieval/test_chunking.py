import re

import pytest

from retrieval.chunking import (
    chunk_document,
    clean_document,
    clean_text,
    split_chunks,
    split_spans,
)


def test_cleaning_normalises_spacing_and_mends_broken_words():
    raw = "Docu-\nment\x00  with\t\tgaps\r\n\r\n\r\nand\u00a0more  "

    assert clean_text(raw) == "Document with gaps\n\nand more"


def test_chunks_cover_the_text_within_the_size_with_overlap():
    text = " ".join(f"Sentence number {n} is here." for n in range(400))

    chunks = split_chunks(text, size=500, overlap=100)

    assert all(len(c) <= 500 for c in chunks)
    assert chunks[0].startswith("Sentence number 0 ")
    assert chunks[-1].endswith("Sentence number 399 is here.")
    for earlier, later in zip(chunks, chunks[1:], strict=False):
        assert earlier.endswith(".")
        assert later[:20] in earlier  # the overlap repeats the end of the previous chunk
    assert split_chunks("") == []


def test_spans_point_at_the_chunks_without_their_surrounding_space():
    text = "  first part here.\n\n\n   second part here.  "

    spans = split_spans(text, size=20, overlap=5)

    assert [text[start:end] for start, end in spans] == split_chunks(text, size=20, overlap=5)
    assert all(not text[s].isspace() and not text[e - 1].isspace() for s, e in spans)


# Every word of page N names its page: w<N>x<k>. Between words, much that cleaning removes
# or changes in length: runs of spaces and tabs, a ligature (one character becomes two),
# a word broken by a hyphen at a line's end, blank lines. A page's cleaned text is about
# half its extracted length, so offsets into the extracted text point far off.
def _messy_page(number: int, words: int = 60) -> str:
    parts = []
    for k in range(words):
        word = f"w{number}x{k}"
        if k % 7 == 3:
            word = f"w{number}-\nx{k}"  # mended to w<N>x<k>
        parts.append(word)
        parts.append(" \t  \u00a0 " if k % 2 else "  \n\n\n  ")
        if k % 11 == 5:
            parts.append("\ufb01 ")  # "ﬁ", cleaned to "fi"
    return "".join(parts)


def _joined(pages: list[str]) -> tuple[str, list[int]]:
    """The pages as the PDF reader joins them: a blank line between, with their offsets."""
    starts, offset = [], 0
    for page in pages:
        starts.append(offset)
        offset += len(page) + 2
    return "\n\n".join(pages), starts


def _pages_named(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"w(\d+)x", text)]


def test_each_chunk_knows_its_pages_although_cleaning_moved_every_offset():
    pages = [_messy_page(n) for n in range(1, 9)]
    text, starts = _joined(pages)

    pieces = chunk_document(text, page_starts=starts, size=300, overlap=80)

    assert len(clean_text(text)) < len(text) * 0.7  # cleaning did shift the offsets
    assert len(pieces) > 10
    for piece in pieces:
        named = _pages_named(piece.text)
        assert named, piece.text
        assert (piece.page_start, piece.page_end) == (min(named), max(named)), piece.text
    assert {p.page_start for p in pieces} == set(range(1, 9))


def test_the_chunks_are_those_of_the_whole_text_cleaned_at_once():
    pages = [_messy_page(n, words=40) for n in range(1, 5)]
    text, starts = _joined(pages)

    pieces = chunk_document(text, page_starts=starts, size=250, overlap=50)

    assert [p.text for p in pieces] == split_chunks(clean_text(text), size=250, overlap=50)
    assert clean_document(text, page_starts=starts).text == clean_text(text)


def test_a_chunk_overlapping_a_page_boundary_spans_both_pages():
    pages = ["alpha " * 30, "bravo " * 30, "charlie " * 30]
    text, starts = _joined([p.strip() for p in pages])

    pieces = chunk_document(text, page_starts=starts, size=150, overlap=60)

    across = [p for p in pieces if p.page_start != p.page_end]
    assert across, [(p.page_start, p.page_end) for p in pieces]
    for piece in across:
        assert piece.page_end == piece.page_start + 1
        first, last = piece.text.split()[0], piece.text.split()[-1]
        assert first == ["alpha", "bravo", "charlie"][piece.page_start - 1]
        assert last == ["alpha", "bravo", "charlie"][piece.page_end - 1]
    # A chunk that ended at a page's end is followed by one that starts with its last words
    # (the overlap) on that page and goes on into the next.
    pairs = list(zip(pieces, pieces[1:], strict=False))
    assert any(
        earlier.page_end == later.page_start < later.page_end
        and earlier.text.endswith(" ".join(later.text.split()[:3]))
        for earlier, later in pairs
    )


def test_pages_without_text_are_skipped_in_the_numbering_not_lost():
    pages = ["one " * 20, "", "   \n  ", "four " * 20, ""]
    text, starts = _joined([p.strip() if p.strip() else p for p in pages])

    pieces = chunk_document(text, page_starts=starts, size=60, overlap=10)

    spans = {(p.page_start, p.page_end) for p in pieces}
    assert spans <= {(1, 1), (1, 4), (4, 4)}
    assert all(p.page_start == 1 for p in pieces if "one" in p.text)
    assert all(p.page_end == 4 for p in pieces if "four" in p.text)


def test_without_pages_a_chunk_has_none():
    [piece] = chunk_document("a few words", page_starts=())

    assert (piece.page_start, piece.page_end, piece.section) == (None, None, "")


def test_a_pdf_chunk_is_in_the_latest_section_that_starts_on_or_before_its_first_page():
    pages = [f"page{n} " * 40 for n in range(1, 7)]
    text, starts = _joined([p.strip() for p in pages])
    outline = [
        {"title": "Introduction", "level": 0, "page": 2},
        {"title": "Methods", "level": 0, "page": 4},
        {"title": "Sampling", "level": 1, "page": 4},  # the same page: deeper, later wins
        {"title": "Nowhere", "level": 0, "page": None},
        {"title": "Past the end", "level": 0, "page": 99},
        {"title": "Results", "level": 0, "page": 6},
    ]

    pieces = chunk_document(text, page_starts=starts, outline=outline, size=120, overlap=30)

    expected = {1: "", 2: "Introduction", 3: "Introduction", 4: "Sampling", 5: "Sampling"}
    expected[6] = "Results"
    for piece in pieces:
        assert piece.section == expected[piece.page_start], (piece.page_start, piece.text)
    assert {p.section for p in pieces} == {"", "Introduction", "Sampling", "Results"}


def test_an_outline_out_of_page_order_still_gives_each_page_its_section():
    pages = [f"page{n} " * 30 for n in range(1, 5)]
    text, starts = _joined([p.strip() for p in pages])
    outline = [
        {"title": "Appendix", "level": 0, "page": 4},
        {"title": "Body", "level": 0, "page": 1},
    ]

    pieces = chunk_document(text, page_starts=starts, outline=outline, size=100, overlap=20)

    assert all(p.section == ("Appendix" if p.page_start == 4 else "Body") for p in pieces)


def test_a_word_chunk_is_in_the_section_whose_heading_precedes_its_start():
    # A Word document's text: paragraphs joined by blank lines, headings at offsets into
    # it; the spacing cleaning removes moves every heading.
    blocks = [
        ("Preface", None),
        ("alpha   \t  " * 30, None),
        ("Chapter  One", 0),
        ("bravo \t\t  " * 30, None),
        ("Part  A", 1),
        ("charlie    " * 30, None),
    ]
    text = "\n\n".join(block for block, _ in blocks)
    outline, offset = [], 0
    for block, level in blocks:
        if level is not None:
            outline.append({"title": block, "level": level, "offset": offset})
        offset += len(block) + 2

    pieces = chunk_document(text, outline=outline, size=120, overlap=40)

    cleaned = clean_document(text, outline=outline)
    assert [title for _, title in cleaned.sections] == ["Chapter One", "Part A"]
    assert [cleaned.text[at:].split("\n")[0] for at, _ in cleaned.sections] == [
        "Chapter One",
        "Part A",
    ]
    for piece in pieces:
        first = piece.text.split()[0]
        assert piece.page_start is None and piece.page_end is None
        if first in ("Preface", "alpha"):
            assert piece.section == ""
        elif first in ("Chapter", "bravo"):
            assert piece.section == "Chapter One"
        else:
            assert first in ("Part", "charlie") and piece.section == "Part A"
    assert {p.section for p in pieces} == {"", "Chapter One", "Part A"}


def test_section_titles_are_one_line_and_bounded():
    outline = [{"title": "A\n  long   " + "x" * 400, "level": 0, "page": 1}]

    [piece] = chunk_document("text", page_starts=[0], outline=outline)

    assert piece.section.startswith("A long x") and len(piece.section) == 300


@pytest.mark.parametrize("size", [50, 400])
def test_chunking_a_large_document_keeps_every_page(size):
    pages = [f"p{n}word " * 50 for n in range(1, 301)]
    text, starts = _joined([p.strip() for p in pages])

    pieces = chunk_document(text, page_starts=starts, size=size, overlap=size // 5)

    covered = set()
    for piece in pieces:
        covered.update(range(piece.page_start, piece.page_end + 1))
    assert covered == set(range(1, 301))
