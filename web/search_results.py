"""How the search page shows a result: its snippet in pieces, the matched words marked,
where it is in its document (pages, section) and the link that opens the document there.

The snippet is document text: it is cut into plain pieces here and each piece is escaped
by the template on its own, so a <mark> around a match is the only markup it ever gets."""

from dataclasses import dataclass

from django.urls import reverse
from django.utils.http import urlencode

from retrieval.marks import Piece, cut_at_marks
from retrieval.search import Hit
from web.document_parts import CHUNKS_PER_PAGE


@dataclass(frozen=True)
class Result:
    hit: Hit
    pieces: list[Piece]
    # Opens the document at the result: its page in the text, or its chunk where the
    # format has no pages.
    url: str
    pages: str
    # Every passage of the document that holds the words: its search alone.
    passages_url: str


def pages_label(start: int | None, end: int | None) -> str:
    """ "p. 3", "p. 3–4", or "" where the format has no pages."""
    if start is None:
        return ""
    if end is None or end == start:
        return f"p. {start}"
    return f"p. {start}–{end}"


def result_url(hit: Hit, q: str = "") -> str:
    """The document's page at the result: the page that holds the first marked word,
    with the query's words marked in it and the first of them its anchor (or the page's
    top, where none is found there); without pages (a Word document), its chunk in the
    list of chunks, the words marked there."""
    url = reverse("web:document_detail", args=[hit.document_id])
    if hit.page_start is not None:
        page = hit.page or hit.page_start
        if not q:
            return f"{url}?page={page}#page-{page}"
        return f"{url}?{urlencode({'page': page, 'q': q})}#page-{page}-found"
    chunks = {"chunks": hit.chunk_index // CHUNKS_PER_PAGE + 1, **({"q": q} if q else {})}
    return f"{url}?{urlencode(chunks)}#chunk-{hit.chunk_index}"


def results_shown(hits: list[Hit], q: str = "") -> list[Result]:
    search = reverse("web:search")
    return [
        Result(
            hit=hit,
            pieces=cut_at_marks(hit.snippet, hit.marks),
            url=result_url(hit, q),
            pages=pages_label(hit.page_start, hit.page_end),
            passages_url=f"{search}?{urlencode({'q': q, 'document': hit.document_id})}",
        )
        for hit in hits
    ]
