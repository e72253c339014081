"""HTML pages for members: search. Thin callers of services (documents: document_views)."""

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.http import urlencode

from core.errors import NotFound, ServiceError
from documents.models import Document, Organisation
from documents.selectors import document_get, organisations_for_user
from retrieval.passages import PAGE_ORDER, RANK_ORDER, document_passages
from retrieval.query import parse
from retrieval.search import MAX_QUERY_CHARS, documents_search
from web.organisation_views import current_organisation
from web.search_results import results_shown

RESULTS_PER_PAGE = 20
# Pages of results offered: deeper than this a search is better narrowed than paged.
RESULT_PAGES = 10


def _offset(request: HttpRequest) -> int:
    try:
        offset = int(request.GET.get("offset", "0"))
    except ValueError:
        return 0
    last = (RESULT_PAGES - 1) * RESULTS_PER_PAGE
    return min(max(offset, 0), last) // RESULTS_PER_PAGE * RESULTS_PER_PAGE


def _searched_document(request: HttpRequest, organisation: Organisation) -> Document | None:
    """The one document `?document=` asks to search, if any: the organisation's, or 404."""
    wanted = request.GET.get("document", "").strip()
    if not wanted:
        return None
    try:
        return document_get(organisation=organisation, document_id=uuid.UUID(wanted))
    except (ValueError, NotFound):
        raise Http404("No such document in your organisation.") from None


@login_required
def search_view(request: HttpRequest) -> HttpResponse:
    """The organisation's documents that match `?q=`, a page of them at a time
    (`?offset=`); with `?document=`, every passage of that one document that holds the
    words, in page order (or best first, `?order=rank`)."""
    organisation = current_organisation(request)
    document = _searched_document(request, organisation)
    q = request.GET.get("q", "").strip()
    offset = _offset(request)
    # One document's passages: in page order unless asked best first.
    order = RANK_ORDER if request.GET.get("order") == RANK_ORDER else PAGE_ORDER
    results, status = None, 200
    if q:
        try:
            if document is not None:
                results = document_passages(
                    organisation=organisation,
                    document_id=document.id,
                    query=q,
                    order=order,
                    limit=RESULTS_PER_PAGE,
                    offset=offset,
                )
            else:
                results = documents_search(
                    organisation=organisation, query=q, limit=RESULTS_PER_PAGE, offset=offset
                )
        except ServiceError as exc:
            messages.error(request, exc.message)
            status = exc.status_code

    def page_url(at: int, *, ordered: str = order, words: str = q) -> str:
        query = {"q": words, **({"document": document.id, "order": ordered} if document else {})}
        return "?" + urlencode({**query, **({"offset": at} if at else {})})

    more = (
        results is not None
        and results.more
        and offset + RESULTS_PER_PAGE < (RESULT_PAGES * RESULTS_PER_PAGE)
    )
    context = {
        "organisation": organisation,
        "organisations": organisations_for_user(user=request.user),
        "q": q,
        "max_chars": MAX_QUERY_CHARS,
        "document": document,
        "results": results,
        "shown": results_shown(results.hits, q) if results else [],
        "first": offset + 1,
        "last": offset + (len(results.hits) if results else 0),
        "paged": offset > 0 or (results is not None and results.more),
        "previous_url": page_url(max(offset - RESULTS_PER_PAGE, 0)) if offset else "",
        "next_url": page_url(offset + RESULTS_PER_PAGE) if more else "",
        # Past the last page offered, more may still match: narrowing finds them.
        "beyond": results is not None and results.more and not more,
        "all_url": "?" + urlencode({"q": q}) if q else "?",
        "order": order,
        "nothing_to_find": bool(q) and not parse(q).clauses,
        "other_order_url": page_url(0, ordered=PAGE_ORDER if order == RANK_ORDER else RANK_ORDER),
        "suggestion_url": page_url(0, words=results.suggestion)
        if results and results.suggestion
        else "",
    }
    return render(request, "web/search.html", context, status=status)
