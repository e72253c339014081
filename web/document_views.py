"""HTML pages for members: the documents list (with the upload form), a page per document
and its file. Thin callers of services and selectors; the JSON answers that keep both up
to date are in live_views.py."""

import uuid

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

import core.uploads
from core.errors import NotFound, ServiceError
from core.http import download_response, kept_response
from core.uploads import client_file_name, upload_refusal
from documents.models import Document, DocumentKind, Membership, Organisation
from documents.pictures import (
    PICTURE_MAX_AGE_SECONDS,
    PICTURE_MEDIA_TYPE,
    page_picture_get,
    page_picture_tag,
)
from documents.roles import abilities
from documents.s3 import presigned_supported
from documents.selectors import document_file, document_get, document_list
from documents.services.quota import quota_get
from formats.base import MEDIA_TYPES
from pipeline.models import RunSource, RunStatus
from pipeline.selectors import document_runs, documents_filtered, documents_with_latest_runs
from pipeline.services.receive import upload_receive
from web.document_parts import (
    PART_TEMPLATES,
    RUNS_SHOWN,
    DocumentPage,
    part_context,
    part_digests,
)
from web.listing import LIVE_MAX_DOCUMENTS, quota_context, row_digest
from web.organisation_views import current_membership
from web.refusals import refusal_words
from web.runs import SOURCE_WORDS, is_active
from web.upload_views import SECOND_COPY_LABEL, allow_duplicate, already_uploaded_words

DOCUMENTS_PER_PAGE = 25
# With documents in S3, the page sends a file larger than this straight to S3 (a direct
# upload, as the API's) instead of through the web.
DIRECT_UPLOAD_BYTES = 8 * 1024 * 1024

STATUS_CHOICES = [
    (value, "Stopped" if value == RunStatus.DEAD_LETTER else label)
    for value, label in RunStatus.choices
]
SOURCE_CHOICES = list(SOURCE_WORDS.items())


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


def _upload_files(request: HttpRequest, membership: Membership) -> tuple[int, dict[str, str]]:
    """Accept the files of the upload form sent without JavaScript, one after another; each
    accepted or refused one gets its message. Returns the status of the answer and the
    headers it carries (Retry-After when the system is busy); 202 when any was accepted."""
    refusals: list[ServiceError] = []
    # An empty file past the form's bound has no block to be skipped at: left out here.
    uploads = request.FILES.getlist("file")[: core.uploads.FORM_MAX_FILES]
    # What reading the request refused (the files past the form's bound, or past the size
    # limit), and a form with no file: each one refusal, received as every upload is.
    if (refused := upload_refusal(request)) or not uploads:
        uploads = [None, *uploads]
    accepted = 0
    second_copy = allow_duplicate(request)
    for upload in uploads:
        name = client_file_name(request, upload) if upload is not None else None
        try:
            acceptance = upload_receive(
                channel="web",
                organisation=membership.organisation,
                upload=upload,
                filename=name,
                refused=refused if upload is None else None,
                source=RunSource.WEB,
                user=request.user,
                allow_duplicate=second_copy,
            )
        except ServiceError as exc:
            size = upload.size if upload is not None else None
            messages.error(request, refusal_words(exc, name=name, size=size))
            refusals.append(exc)
            continue
        accepted += 1
        if acceptance.duplicate:
            messages.info(request, already_uploaded_words(name=name, acceptance=acceptance))
            continue
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
    filtered = any(chosen.values())
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "filters": filters,
        "filtered": filtered,
        "page": page,
        "rows": [{"document": d, "run": r, "digest": row_digest(d, r)} for d, r in rows],
        # Unfiltered, the paginator has counted them all already.
        "total": (
            document_list(organisation=organisation).count() if filtered else page.paginator.count
        ),
        "query": query.urlencode(),
        "can": abilities(membership.role),
        "direct_above": _direct_above(),
        "max_upload_bytes": settings.PAPERLANE_MAX_UPLOAD_BYTES,
        "second_copy_label": SECOND_COPY_LABEL,
        "live_max_documents": LIVE_MAX_DOCUMENTS,
        **quota_context(quota_get(organisation_id=organisation.id)),
    }
    response = render(request, "web/document_list.html", context, status=status)
    for header, value in headers.items():
        response[header] = value
    return response


def _direct_above() -> int:
    """Files larger than this go straight to S3 from the page; 0: none do (documents are
    not in S3)."""
    return DIRECT_UPLOAD_BYTES if presigned_supported() else 0


@login_required
@require_GET
def document_detail_view(request: HttpRequest, document_id: uuid.UUID) -> HttpResponse:
    """A document: what it is, its runs and their stages, its text page by page (`?page=N`
    opens page N) and its chunks, its file, and what the member's role may do with it."""
    membership = current_membership(request)
    document = _document_or_404(membership.organisation, document_id)
    page = DocumentPage(
        request=request,
        membership=membership,
        document=document,
        runs=document_runs(document=document, limit=RUNS_SHOWN),
    )
    context = {
        **part_context(page, list(PART_TEMPLATES)),
        "digests": part_digests(page),
        "active": is_active(page.latest),
    }
    return render(request, "web/document_detail.html", context)


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
    return download_response(
        stored=stored, filename=document.filename, content_type=MEDIA_TYPES[document.kind]
    )


@login_required
@require_GET
def page_picture_view(request: HttpRequest, document_id: uuid.UUID, number: int) -> HttpResponse:
    """A picture of page `number` of the document (`?size=page`, or `thumb` for the list's
    preview), within the organisation as its file is; 304 to the ETag of the picture the
    browser holds. 404 for a page it has no picture of (a DOCX, a page past its end)."""
    membership = current_membership(request)
    document = _document_or_404(membership.organisation, document_id)
    size = request.GET.get("size", "page")
    try:
        # Checked first: a picture it cannot have is a 404, whatever ETag is claimed.
        tag = page_picture_tag(document=document, number=number, size=size)
        return kept_response(
            request,
            tag=tag,
            body=lambda: page_picture_get(document=document, number=number, size=size),
            content_type=PICTURE_MEDIA_TYPE,
            max_age=PICTURE_MAX_AGE_SECONDS,
        )
    except NotFound:
        raise Http404("No picture of that page.") from None
    except ServiceError as exc:  # the store failed: try again later
        return HttpResponse(
            exc.message, status=exc.status_code, headers=exc.headers(), content_type="text/plain"
        )
