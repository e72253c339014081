"""A query's words marked where they are in a document's pages, as the search index
matches them (stems included: "harbours" for "harbour"; stop words never), for the
document page a search result opens.

PostgreSQL's `ts_headline` marks them, with the index's own parser and dictionary, over
the pages shown (ten at most, each cut to what the page shows): the same words search
marks in its snippets. The marks are two control characters extracted text never holds
(formats.base.clean_extracted drops them), split off here into plain pieces, so that the
template escapes every piece and a <mark> is the only markup the text ever gets. The
query's Chinese, Japanese and Korean characters, which the parser cannot tell apart in a
run, are marked where they are found (core/cjk.py).
"""

from dataclasses import dataclass

from django.conf import settings

from core import cjk
from retrieval.query import parse
from retrieval.search import within_search_time
from retrieval.search_index import check_language

_START, _STOP = "\x01", "\x02"


@dataclass(frozen=True)
class Piece:
    text: str
    marked: bool


def marked_pages(texts: list[str], query: str) -> list[list[Piece]]:
    """Each of `texts` cut into pieces, the words of `query` (not its -words) marked;
    SearchTooSlow if marking them takes longer than a search may."""
    words = parse(query).words if query.strip() else []
    if not words or not any(texts):
        return [[Piece(text, False)] if text else [] for text in texts]
    language = check_language(settings.PAPERLANE_SEARCH_LANGUAGE)

    def read(local) -> list[str]:
        cursor = local.cursor
        cursor.execute(
            """
            SELECT ts_headline(%s::regconfig, page, to_tsquery(%s::regconfig, %s),
                               %s)
            FROM unnest(%s::text[]) WITH ORDINALITY AS t(page, n) ORDER BY n
            """,
            [
                language,
                language,
                " | ".join(f"'{word}'" for word in words),
                f"HighlightAll=true, StartSel={_START}, StopSel={_STOP}",
                texts,
            ],
        )
        return [row[0] for row in cursor.fetchall()]

    # Held to the search's time, as the search that led here was (SearchTooSlow past it).
    return [_pieces(headline, words) for headline in within_search_time(read)]


def _pieces(headline: str, words: list[str]) -> list[Piece]:
    pieces = []
    for part in headline.split(_START):
        marked, _, rest = part.partition(_STOP) if _STOP in part else ("", "", part)
        if marked:
            pieces.append(Piece(marked, True))
        if rest:
            pieces.extend(_with_cjk_marked(rest, words))
    return pieces


def _with_cjk_marked(text: str, words: list[str]) -> list[Piece]:
    """`text` (unmarked by ts_headline) with the query's Chinese, Japanese or Korean
    characters marked: the parser reads a run of them as one word, which the query's
    pairs (core/cjk.py) never equal."""
    return cut_at_marks(text, cjk.spans(text, words))


def cut_at_marks(text: str, marks) -> list[Piece]:
    """`text` cut at its `marks` ((start, end) offsets): the marked words and the text
    between them, in order. A mark that overlaps one before it, or starts outside the
    text, is left out; one that runs past its end is cut there."""
    pieces, at = [], 0
    for start, end in sorted(marks):
        end = min(end, len(text))
        if start < at or start >= end:
            continue
        if start > at:
            pieces.append(Piece(text[at:start], False))
        pieces.append(Piece(text[start:end], True))
        at = end
    if at < len(text):
        pieces.append(Piece(text[at:], False))
    return pieces
