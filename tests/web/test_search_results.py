"""A search result's snippet cut into plain and marked pieces, and its pages in words."""

from retrieval.marks import Piece, cut_at_marks
from web.search_results import pages_label


def _shown(pieces: list[Piece]) -> str:
    return "".join(f"[{p.text}]" if p.marked else p.text for p in pieces)


def test_the_marked_words_are_pieces_of_their_own_in_order():
    snippet = "the harbour board met at the harbour"

    pieces = cut_at_marks(snippet, [(29, 36), (4, 11), (12, 17)])

    assert _shown(pieces) == "the [harbour] [board] met at the [harbour]"
    assert "".join(p.text for p in pieces) == snippet


def test_marks_that_overlap_or_fall_outside_the_snippet_are_left_out():
    snippet = "tide tables"

    assert _shown(cut_at_marks(snippet, [(0, 4), (2, 6), (5, 99), (40, 50)])) == (
        "[tide] [tables]"
    )
    assert _shown(cut_at_marks(snippet, [])) == "tide tables"
    assert cut_at_marks("", [(0, 3)]) == []


def test_pages_in_words():
    assert pages_label(3, 3) == "p. 3"
    assert pages_label(3, 4) == "p. 3–4"
    assert pages_label(None, None) == ""
