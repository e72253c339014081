"""HTML pages for members: search. Thin callers of services (documents: document_views)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from core.errors import ServiceError
from documents.selectors import (
    organisations_for_user,
)
from retrieval.search import MAX_QUERY_CHARS, documents_search
from web.organisation_views import current_organisation


@login_required
def search_view(request: HttpRequest) -> HttpResponse:
    organisation = current_organisation(request)
    q = request.GET.get("q", "").strip()
    results, status = None, 200
    if q:
        try:
            results = documents_search(organisation=organisation, query=q, limit=20)
        except ServiceError as exc:
            messages.error(request, exc.message)
            status = exc.status_code
    context = {
        "organisation": organisation,
        "organisations": organisations_for_user(user=request.user),
        "q": q,
        "max_chars": MAX_QUERY_CHARS,
        "results": results,
    }
    return render(request, "web/search.html", context, status=status)
