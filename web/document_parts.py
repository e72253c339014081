"""The parts of a document's page that change while it is processed: its facts, its
processing (runs and their stages), its text and its chunks. For each, a digest of what
it shows, made from the document's row and its runs alone (no text, chunk or template is
read for it), and its HTML. The page is rendered with every part and its digest; the live
answer renders only the parts whose digest differs from the one the page holds."""

from dataclasses import dataclass
from datetime import datetime

from django.core.paginator import Paginator
from django.http import HttpRequest
from django.template.loader import render_to_string

from connectors.selectors import document_file_versions
from documents.models import Document, Membership
from documents.roles import abilities
from documents.selectors import document_chunks, document_text_window, document_versions
from pipeline.models import ImportRun
from pipeline.selectors import document_first_run, document_run_count
from retrieval.marks import marked_pages
from retrieval.search import MAX_QUERY_CHARS, SearchTooSlow
from web.runs import (
    ENDED_WORDS,
    connector_file,
    digest,
    ended_without_success,
    run_state,
    source_words,
)

# The extracted text is shown this many pages at a time, each page at most this long.
TEXT_PAGES_PER_SCREEN = 10
TEXT_PAGE_CHARS = 50_000
CHUNKS_PER_PAGE = 20
# A document's newest runs shown (a connected file makes one per version), and versions.
RUNS_SHOWN = 20
VERSIONS_SHOWN = 20

PART_TEMPLATES = {
    "facts": "web/_document_facts.html",
    "status": "web/_document_status.html",
    "text": "web/_document_text.html",
    "chunks": "web/_document_chunks.html",
}


@dataclass(frozen=True)
class DocumentPage:
    """What every part of a document's page is made from: the request (its `?page=` and
    `?chunks=`), the member's membership, the document and its newest runs, newest first
    (pipeline.selectors.document_runs, RUNS_SHOWN of them)."""

    request: HttpRequest
    membership: Membership
    document: Document
    runs: list[ImportRun]

    @property
    def latest(self) -> ImportRun | None:
        return self.runs[0] if self.runs else None


def _ended(page: DocumentPage) -> str:
    """How the newest run ended without success ("failed", "was cancelled"), or "" while
    it is under way, once it succeeded, or without a run: what the parts say instead of
    "once it has been read" of a version that will not be unless someone acts."""
    return ENDED_WORDS.get(page.latest.status, "") if page.latest else ""


def text_first_page(request: HttpRequest) -> int:
    """The first page of the screen of text that holds `?page=N`."""
    try:
        wanted = max(int(request.GET.get("page", "1")), 1)
    except ValueError:
        wanted = 1
    return (wanted - 1) // TEXT_PAGES_PER_SCREEN * TEXT_PAGES_PER_SCREEN + 1


def part_digests(page: DocumentPage) -> dict[str, str]:
    """Each part's digest: it changes whenever what the part shows may have."""
    document, latest = page.document, page.latest
    states = {
        "facts": (
            document.filename,
            document.kind,
            document.size_bytes,
            document.page_count,
            document.version,
            document.searchable_version,
            document.text_engine,
            len(document.ocr_pages or ()),
            document.source_deleted_at,
            # How its newest run ended without success (its version's search says so).
            _ended(page),
        ),
        "status": (
            page.membership.role,
            document.page_count,
            tuple(document.unreadable_pages or ()),
            tuple(document.textless_pages or ()),
            tuple(run_state(run) for run in page.runs),
        ),
        "text": (
            document.version,
            document.text_chars,
            text_first_page(page.request),
            searched_words(page.request),
            _ended(page),
        ),
        # The chunks of a version not yet searchable are shown while its run embeds them.
        "chunks": (
            document.version,
            document.searchable_version,
            document.chunk_count,
            page.request.GET.get("chunks", ""),
            run_state(latest) if latest else None,
        ),
    }
    return {name: digest(state) for name, state in states.items()}


@dataclass(frozen=True)
class VersionRow:
    """One version of a document as its page lists it."""

    number: int
    # When it came in: uploaded, or found in its connected folder.
    added_at: datetime | None
    size_bytes: int | None
    pages: int | None
    searchable: bool
    current: bool
    # Whether search finds it, and if not, why not (yet).
    search: str


def _search_words(*, searchable: bool, current: bool, document: Document, latest) -> str:
    if searchable:
        return "What search finds"
    if not current:
        return "–"
    older = document.searchable_version
    if ended_without_success(latest):
        # Nothing is under way: say how it ended, not that it will be done.
        also = f"; search finds version {older}" if older else ""
        return f"No: its processing {ENDED_WORDS[latest.status]}{also} (see Processing)"
    if older:
        return f"Not yet: search finds version {older} until this one is done"
    return "Not yet: once it is processed"


def _versions(document: Document, latest: ImportRun | None) -> list[VersionRow]:
    read = document_versions(document=document, limit=VERSIONS_SHOWN)
    files = document_file_versions(document=document, versions=[v.number for v in read])
    rows = []
    for version in read:
        record = files.get(version.number)
        if record is not None:
            added_at, size = record.created_at, record.size_bytes
        else:  # an upload's one version
            added_at, size = document.created_at, None
        if version.current:
            size = document.size_bytes
        pages = version.pages if version.pages is not None else version.charged
        if pages is None and version.current:
            pages = document.page_count  # as counted so far, before its text is read
        rows.append(
            VersionRow(
                number=version.number,
                added_at=added_at,
                size_bytes=size,
                pages=pages
                if pages is not None
                else (document.page_count if version.current else None),
                searchable=version.searchable,
                current=version.current,
                search=_search_words(
                    searchable=version.searchable,
                    current=version.current,
                    document=document,
                    latest=latest,
                ),
            )
        )
    return rows


def _facts(page: DocumentPage) -> dict:
    first_run = document_first_run(document=page.document)
    return {
        "source": source_words(first_run) if first_run else "",
        # Where its file lives now (the newest run's record: a file may have moved).
        "connector_import": connector_file(page.latest) or connector_file(first_run),
        "versions": _versions(page.document, page.latest),
        "older_versions": max(page.document.version - VERSIONS_SHOWN, 0),
    }


def _status(page: DocumentPage) -> dict:
    older = document_run_count(document=page.document) - len(page.runs)
    return {
        "runs": page.runs,
        "run": page.latest,
        "older_runs": max(older, 0),
        "can": abilities(page.membership.role),
    }


def _text(page: DocumentPage) -> dict:
    text = document_text_window(
        document=page.document,
        first=text_first_page(page.request),
        count=TEXT_PAGES_PER_SCREEN,
        page_chars=TEXT_PAGE_CHARS,
    )
    screens = []
    if text is not None:
        screens = [
            (first, min(first + TEXT_PAGES_PER_SCREEN - 1, text.total))
            for first in range(1, text.total + 1, TEXT_PAGES_PER_SCREEN)
        ]
    searched = searched_words(page.request)
    marked = _marked(text, searched) if text is not None else []
    return {
        "text": text,
        "text_screens": screens,
        "text_query": _query(page, "page"),
        "searched": searched,
        # Each shown page with its text in pieces, the searched words marked (None: not
        # searched, the text as it is).
        "shown_pages": list(zip(text.pages, marked, strict=True)) if text is not None else [],
        "marks_shown": sum(bool(p.mark) for pieces in marked if pieces for p in pieces),
        # Searched, but the marking ran out of time: the text is shown unmarked.
        "unmarked": bool(searched) and all(pieces is None for pieces in marked),
        "unmarked_query": _query(page, "q"),
    }


def searched_words(request: HttpRequest) -> str:
    """The words a search result opened the page with (`?q=`), to be marked in its text."""
    return request.GET.get("q", "").strip()[:MAX_QUERY_CHARS]


@dataclass(frozen=True)
class MarkedPiece:
    text: str
    # The mark's number on this screen (from 1), None for the text between marks; the
    # numbers of the marks before and after it, for the links between them.
    mark: int | None = None
    previous: int | None = None
    next: int | None = None
    # Where a result's link lands on this page (`#page-N-found`): before its first mark,
    # or at its top when it has none.
    anchor: bool = False


def _marked(text, searched: str) -> list[list[MarkedPiece] | None]:
    """Each shown page's text in pieces, the searched words marked and numbered across the
    screen, in page order; None for each page when nothing was searched."""
    pages = _marked_pieces([shown.text for shown in text.pages], searched)
    if pages is None:
        return [None] * len(text.pages)
    count = sum(piece.marked for pieces in pages for piece in pieces)
    marked, at = [], 0
    for pieces in pages:
        out, first = [], at + 1
        for piece in pieces:
            if not piece.marked:
                out.append(MarkedPiece(piece.text))
                continue
            at += 1
            out.append(
                MarkedPiece(
                    piece.text,
                    mark=at,
                    previous=at - 1 if at > 1 else None,
                    next=at + 1 if at < count else None,
                    anchor=at == first,
                )
            )
        if out and at < first:  # no mark on this page: its top
            out[0] = MarkedPiece(out[0].text, anchor=True)
        marked.append(out)
    return marked


def _chunks(page: DocumentPage) -> dict:
    chunks = Paginator(document_chunks(document=page.document), CHUNKS_PER_PAGE).get_page(
        page.request.GET.get("chunks")
    )
    return {
        "chunks": chunks,
        # Each chunk shown with the words a search result opened it with marked (a Word
        # document's result opens its chunk: it has no fixed pages); None: unmarked.
        "shown_chunks": list(zip(chunks, _marked_chunks(chunks, page.request), strict=True)),
        "chunk_query": _query(page, "chunks"),
        # A chunk's pages link to them in the text, on the same page of chunks.
        "page_query": _query(page, "page"),
    }


def _marked_chunks(chunks, request: HttpRequest) -> list[list | None]:
    pieces = _marked_pieces([chunk.text for chunk in chunks], searched_words(request))
    return [None] * len(chunks) if pieces is None else pieces


def _marked_pieces(texts: list[str], searched: str) -> list[list] | None:
    """Each of `texts` in pieces, the searched words marked (retrieval/marks.py); None when
    nothing was searched or the marking ran out of time (the texts shown as they are)."""
    if not searched:
        return None
    try:
        return marked_pages(texts, searched)
    except SearchTooSlow:
        return None


def _query(page: DocumentPage, without: str) -> str:
    """The page's own query but `without` (its links set that one), for its links; the
    digests a live request sends (`have`) are not the page's."""
    query = page.request.GET.copy()
    for name in (without, "have"):
        query.pop(name, None)
    return query.urlencode()


_CONTEXTS = {"facts": _facts, "status": _status, "text": _text, "chunks": _chunks}


def part_context(page: DocumentPage, names: list[str]) -> dict:
    """What the named parts' templates read (only what those parts need is read)."""
    context = {"document": page.document, "ended": _ended(page)}
    for name in names:
        context.update(_CONTEXTS[name](page))
    return context


def parts_render(page: DocumentPage, names: list[str]) -> dict[str, str]:
    """The named parts' HTML."""
    context = part_context(page, names)
    return {
        name: render_to_string(PART_TEMPLATES[name], context, request=page.request)
        for name in names
    }
