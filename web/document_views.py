"""HTML pages for members: the documents list (with the upload form), a page per document,
its file, and the small JSON answers that keep both up to date while work is in progress.
Thin callers of services and selectors."""

import uuid

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_http_methods

from core.errors import NotFound, ServiceError
from core.upload_counts import ACCEPTED, REFUSED, upload_count
from core.uploads import client_file_name, upload_refusal
from documents.downloads import document_file_response
from documents.formats.base import MEDIA_TYPES
from documents.models import Document, DocumentKind, Membership, Organisation
from documents.roles import abilities
from documents.s3 import presigned_supported
from documents.selectors import (
    document_chunks,
    document_file,
    document_get,
    document_list,
    document_text_window,
)
from documents.services.quota import QuotaSnapshot, quota_get
from pipeline.models import RunSource, RunStatus
from pipeline.selectors import (
    document_first_run,
    document_run_count,
    document_runs,
    documents_filtered,
    documents_with_latest_runs,
)
from pipeline.services.accept import document_accept
from web.organisation_views import current_membership
from web.refusals import refusal_words
from web.runs import digest, document_state, is_active

DOCUMENTS_PER_PAGE = 25
# The extracted text is shown this many pages at a time, each page at most this long.
TEXT_PAGES_PER_SCREEN = 10
TEXT_PAGE_CHARS = 50_000
CHUNKS_PER_PAGE = 20
# A document's newest runs shown (a connected file makes one per version).
RUNS_SHOWN = 20
# The live answer of the documents list follows at most this many documents at once.
LIVE_MAX_DOCUMENTS = 100

STATUS_CHOICES = [
    (value, "Stopped" if value == RunStatus.DEAD_LETTER else label)
    for value, label in RunStatus.choices
]
SOURCE_CHOICES = [
    (RunSource.WEB, "Upload"),
    (RunSource.API, "API"),
    (RunSource.CONNECTOR, "Connected folder"),
]


class FilterForm(forms.Form):
    status = forms.ChoiceField(choices=[("", "Any status"), *STATUS_CHOICES], required=False)
    kind = forms.ChoiceField(
        label="Type", choices=[("", "Any type"), *DocumentKind.choices], required=False
    )
    source = forms.ChoiceField(choices=[("", "Any source"), *SOURCE_CHOICES], required=False)


def _document_or_404(organisation: Organisation, document_id: uuid.UUID) -> Document:
    try:
        return document_get(organisation=organisation, document_id=document_id)
    except NotFound:
        raise Http404("No such document in your organisation.") from None


def quota_context(quota: QuotaSnapshot) -> dict:
    """The quota bar's numbers: pages used, held and left, and their shares of the limit."""
    limit = max(quota.page_limit, 1)
    used_share = min(quota.pages_used * 100 / limit, 100)
    return {
        "quota": quota,
        "used_share": f"{used_share:.2f}",
        "held_share": f"{min(quota.pages_reserved * 100 / limit, 100 - used_share):.2f}",
    }


def _row(request: HttpRequest, document: Document, run, can: dict) -> dict:
    """One document of the list as the live answer sends it: its row's HTML and its state."""
    state = digest(document_state(document, [run] if run else []))
    context = {"document": document, "run": run, "can": can, "digest": state}
    return {
        "id": str(document.id),
        "digest": state,
        "active": is_active(run),
        "row": render_to_string("web/_document_row.html", context, request=request),
        "item": render_to_string("web/_upload_item_status.html", context, request=request),
    }


def _upload_files(request: HttpRequest, membership: Membership) -> tuple[int, dict[str, str]]:
    """Accept the files of the upload form sent without JavaScript, one after another; each
    accepted or refused one gets its message. Returns the status of the answer and the
    headers it carries (Retry-After when the system is busy); 202 when any was accepted."""
    refusals: list[ServiceError] = []
    if refused := upload_refusal(request):
        upload_count(channel="web", result=REFUSED, code=refused.code)
        messages.error(request, refused.message)
        refusals.append(refused)
    # An empty file past the form's bound has no block to be skipped at: left out here.
    uploads = request.FILES.getlist("file")[: settings.PAPERLANE_UPLOAD_FORM_MAX_FILES]
    if not uploads and not refusals:
        upload_count(channel="web", result=REFUSED, code="invalid_form")
        messages.error(request, "Choose a PDF or Word (.docx) file to upload.")
        return 400, {}
    accepted = 0
    for upload in uploads:
        name = client_file_name(request, upload)
        try:
            acceptance = document_accept(
                organisation=membership.organisation,
                upload=upload,
                filename=name,
                source=RunSource.WEB,
                user=request.user,
            )
        except ServiceError as exc:
            upload_count(channel="web", result=REFUSED, code=exc.code)
            messages.error(request, refusal_words(exc, name=name, size=upload.size))
            refusals.append(exc)
            continue
        upload_count(channel="web", result=ACCEPTED)
        accepted += 1
        stored = acceptance.document.filename
        messages.success(request, f"“{stored}” was accepted and is queued for processing.")
    if accepted or not refusals:
        return 202, {}
    return refusals[0].status_code, refusals[0].headers()


@login_required
@require_http_methods(["GET", "POST"])
def document_list_view(request: HttpRequest) -> HttpResponse:
    """The organisation's documents, newest first, paged and filtered; above them the upload
    form (its POST, without JavaScript, sends one or many files)."""
    membership = current_membership(request)
    organisation = membership.organisation
    status, headers = 200, {}
    if request.method == "POST":
        status, headers = _upload_files(request, membership)
        if status == 202:
            return redirect("web:document_list")
    filters = FilterForm(request.GET)
    chosen = filters.cleaned_data if filters.is_valid() else {}
    documents = documents_filtered(
        organisation=organisation, **{k: v for k, v in chosen.items() if v}
    )
    page = Paginator(documents, DOCUMENTS_PER_PAGE).get_page(request.GET.get("page"))
    rows = documents_with_latest_runs(documents=list(page.object_list))
    can = current_can(membership)
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "filters": filters,
        "filtered": any(chosen.values()),
        "page": page,
        "rows": [
            {"document": d, "run": r, "digest": digest(document_state(d, [r] if r else []))}
            for d, r in rows
        ],
        "total": document_list(organisation=organisation).count(),
        "query": query.urlencode(),
        "can": can,
        "direct_above": _direct_above(),
        "max_upload_bytes": _max_upload_bytes(),
        **quota_context(quota_get(organisation_id=organisation.id)),
    }
    response = render(request, "web/document_list.html", context, status=status)
    for header, value in headers.items():
        response[header] = value
    return response


def current_can(membership: Membership) -> dict[str, bool]:
    return abilities(membership.role)


def _direct_above() -> int:
    """Files larger than this go straight to S3 from the page; 0: none do."""
    if settings.PAPERLANE_WEB_DIRECT_UPLOAD_BYTES and presigned_supported():
        return settings.PAPERLANE_WEB_DIRECT_UPLOAD_BYTES
    return 0


def _max_upload_bytes() -> int:
    return settings.PAPERLANE_MAX_UPLOAD_BYTES


def _text_first_page(request: HttpRequest) -> int:
    """The first page of the screen of text that holds `?page=N`."""
    try:
        wanted = max(int(request.GET.get("page", "1")), 1)
    except ValueError:
        wanted = 1
    return (wanted - 1) // TEXT_PAGES_PER_SCREEN * TEXT_PAGES_PER_SCREEN + 1


def _detail_context(request: HttpRequest, membership: Membership, document: Document) -> dict:
    runs = document_runs(document=document, limit=RUNS_SHOWN)
    latest = runs[0] if runs else None
    text = document_text_window(
        document=document,
        first=_text_first_page(request),
        count=TEXT_PAGES_PER_SCREEN,
        page_chars=TEXT_PAGE_CHARS,
    )
    chunks = Paginator(document_chunks(document=document), CHUNKS_PER_PAGE)
    chunk_page = chunks.get_page(request.GET.get("chunks"))
    query = request.GET.copy()
    query.pop("page", None)
    chunk_query = request.GET.copy()
    chunk_query.pop("chunks", None)
    first_run = document_first_run(document=document)
    return {
        "document": document,
        "runs": runs,
        "older_runs": max(document_run_count(document=document) - len(runs), 0),
        "run": latest,
        "source": first_run.get_source_display() if first_run else "",
        "connector_import": getattr(first_run, "connector_import", None) if first_run else None,
        "active": is_active(latest),
        "digest": digest(document_state(document, runs)),
        "text": text,
        "text_screens": _screens(text),
        "text_query": query.urlencode(),
        "chunks": chunk_page,
        "chunk_query": chunk_query.urlencode(),
        "can": current_can(membership),
        "media_type": MEDIA_TYPES.get(document.kind, ""),
    }


def _screens(text) -> list[tuple[int, int]]:
    """(first page, last page) of each screen of text."""
    if text is None:
        return []
    return [
        (first, min(first + TEXT_PAGES_PER_SCREEN - 1, text.total))
        for first in range(1, text.total + 1, TEXT_PAGES_PER_SCREEN)
    ]


@login_required
@require_GET
def document_detail_view(request: HttpRequest, document_id: uuid.UUID) -> HttpResponse:
    """A document: what it is, its runs and their stages, its text page by page (`?page=N`
    opens page N) and its chunks, its file, and what the member's role may do with it."""
    membership = current_membership(request)
    document = _document_or_404(membership.organisation, document_id)
    context = _detail_context(request, membership, document)
    return render(request, "web/document_detail.html", context)


# The parts of a document's page that change while it is processed, each a template.
DETAIL_PARTS = {
    "facts": "web/_document_facts.html",
    "status": "web/_document_status.html",
    "text": "web/_document_text.html",
    "chunks": "web/_document_chunks.html",
}


@login_required
@require_GET
def document_live_view(request: HttpRequest, document_id: uuid.UUID) -> JsonResponse:
    """The changing parts of a document's page, for the page's own query (`?page=`,
    `?chunks=`), with a digest of what they show: the page replaces them when it changes."""
    membership = current_membership(request)
    document = _document_or_404(membership.organisation, document_id)
    context = _detail_context(request, membership, document)
    parts = {
        name: render_to_string(template, context, request=request)
        for name, template in DETAIL_PARTS.items()
    }
    return JsonResponse({"digest": context["digest"], "active": context["active"], "parts": parts})


@login_required
@require_GET
def documents_live_view(request: HttpRequest) -> JsonResponse:
    """The rows of the documents named by `?id=` (at most LIVE_MAX_DOCUMENTS; another
    organisation's or a deleted one is left out) and the quota bar, as the list shows them."""
    membership = current_membership(request)
    wanted = request.GET.getlist("id")
    if len(wanted) > LIVE_MAX_DOCUMENTS:
        return JsonResponse(
            {"detail": f"Ask for at most {LIVE_MAX_DOCUMENTS} documents at once."}, status=400
        )
    try:
        ids = [uuid.UUID(value) for value in wanted]
    except ValueError:
        return JsonResponse({"detail": "Each id must be a document's id."}, status=400)
    documents = document_list(organisation=membership.organisation).filter(id__in=ids)
    can = current_can(membership)
    rows = documents_with_latest_runs(documents=list(documents))
    quota = quota_context(quota_get(organisation_id=membership.organisation.id))
    return JsonResponse(
        {
            "documents": [_row(request, document, run, can) for document, run in rows],
            "quota": render_to_string("web/_quota.html", quota, request=request),
            "count": render_to_string(
                "web/_document_count.html",
                {"total": document_list(organisation=membership.organisation).count()},
            ),
        }
    )


@login_required
@require_GET
def document_file_view(request: HttpRequest, document_id: uuid.UUID) -> HttpResponse:
    """The document's original file as an attachment; in S3, a redirect to a short-lived
    link that serves it."""
    membership = current_membership(request)
    document = _document_or_404(membership.organisation, document_id)
    try:
        stored = document_file(document=document)
    except ServiceError as exc:
        messages.error(request, exc.message)
        return redirect("web:document_detail", document_id=document.id)
    return document_file_response(document=document, stored=stored)
