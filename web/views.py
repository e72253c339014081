"""HTML pages for members: upload documents and follow their runs. Thin callers of services."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from core.errors import Forbidden, NotFound, ServiceError
from core.upload_counts import ACCEPTED, REFUSED, upload_count
from core.uploads import client_file_name, upload_refusal
from documents.models import Organisation
from documents.roles import Ability, abilities, refusal, role_allows
from documents.selectors import (
    document_get,
    document_list,
    document_pages_charged,
    document_was_deleted,
    organisations_for_user,
)
from documents.services.quota import quota_get
from pipeline.models import ACTIVE_STATUSES, RunSource
from pipeline.selectors import documents_with_latest_runs, run_get
from pipeline.services.accept import document_accept
from pipeline.services.deletion import document_delete
from pipeline.services.people import run_cancel, run_retry
from pipeline.services.transitions import Actor
from retrieval.search import MAX_QUERY_CHARS, documents_search
from web.organisation_views import current_membership, current_organisation, forbidden


class UploadForm(forms.Form):
    file = forms.FileField(label="PDF or Word (.docx) file")


def _upload(
    request: HttpRequest, organisation: Organisation
) -> tuple[UploadForm, int, dict[str, str]]:
    """Accept the posted file. Returns the form to show, the HTTP status it deserves and
    the headers its answer must carry (Retry-After when the system is busy)."""
    form = UploadForm(request.POST, request.FILES)
    try:
        if refused := upload_refusal(request):
            raise refused
        if not form.is_valid():
            upload_count(channel="web", result=REFUSED, code="invalid_form")
            return form, 400, {}
        upload = form.cleaned_data["file"]
        acceptance = document_accept(
            organisation=organisation,
            upload=upload,
            filename=client_file_name(request, upload),
            source=RunSource.WEB,
            user=request.user,
        )
    except ServiceError as exc:
        upload_count(channel="web", result=REFUSED, code=exc.code)
        messages.error(request, exc.message)
        return UploadForm(), exc.status_code, exc.headers()
    upload_count(channel="web", result=ACCEPTED)
    name = acceptance.document.filename
    messages.success(request, f"“{name}” was accepted and is queued for processing.")
    return UploadForm(), 202, {}


@login_required
def document_list_view(request: HttpRequest) -> HttpResponse:
    membership = current_membership(request)
    organisation = membership.organisation
    form, status, headers = UploadForm(), 200, {}
    if request.method == "POST":
        form, status, headers = _upload(request, organisation)
        if status == 202:
            return redirect("web:document_list")
    rows = documents_with_latest_runs(
        documents=list(document_list(organisation=organisation)[:100])
    )
    context = {
        "organisation": organisation,
        "organisations": organisations_for_user(user=request.user),
        "role": membership.get_role_display(),
        "can": abilities(membership.role),
        "form": form,
        "rows": rows,
        "quota": quota_get(organisation_id=organisation.id),
        "refresh": any(run and run.status in ACTIVE_STATUSES for _, run in rows),
    }
    response = render(request, "web/document_list.html", context, status=status)
    for header, value in headers.items():
        response[header] = value
    return response


@login_required
@require_POST
def run_action_view(request: HttpRequest, run_id, action: str) -> HttpResponse:
    """Retry or cancel one of the member's organisation's runs from the documents page."""
    organisation = current_organisation(request)
    try:
        run = run_get(organisation=organisation, run_id=run_id)
    except NotFound:
        raise Http404("No such run in your organisation.") from None
    try:
        actor = Actor.of(user=request.user)
        if action == "retry":
            run_retry(run=run, actor=actor, admit=True)
        else:
            run_cancel(run=run, actor=actor)
    except Forbidden as exc:
        return forbidden(request, exc)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        name = run.document.filename if run.document else "the document"
        done = "will be processed again" if action == "retry" else "was cancelled"
        messages.success(request, f"“{name}” {done}.")
    return redirect("web:document_list")


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


@login_required
@require_http_methods(["GET", "POST"])
def document_delete_view(request: HttpRequest, document_id) -> HttpResponse:
    """Delete one of the member's organisation's documents: a page that says what deleting
    does (GET), then the deletion itself (POST)."""
    membership = current_membership(request)
    organisation = membership.organisation
    try:
        document = document_get(organisation=organisation, document_id=document_id)
    except NotFound:
        if request.method != "POST" or not document_was_deleted(
            organisation=organisation, document_id=document_id
        ):
            raise Http404("No such document in your organisation.") from None
        # Deleted meanwhile (a second tab, a double click): the list says so.
        messages.error(request, "That document is not there any more.")
        return redirect("web:document_list")
    if request.method != "POST" and not role_allows(membership.role, Ability.DELETE):
        # Said before the page offers a button that would be refused.
        return forbidden(request, refusal(membership.role, Ability.DELETE))
    if request.method != "POST":
        [(document, run)] = documents_with_latest_runs(documents=[document])
        context = {
            "organisation": organisation,
            "organisations": organisations_for_user(user=request.user),
            "document": document,
            "in_pipeline": run is not None and run.status in ACTIVE_STATUSES,
            "charged": document_pages_charged(document=document),
        }
        return render(request, "web/document_delete.html", context)
    try:
        deletion = document_delete(document=document, actor=Actor.of(user=request.user))
    except Forbidden as exc:
        return forbidden(request, exc)
    except ServiceError as exc:
        messages.error(request, exc.message)
    else:
        n = deletion.pages_released
        more = f" {n} held {'page was' if n == 1 else 'pages were'} given back." if n else ""
        messages.success(request, f"“{document.filename}” was deleted.{more}")
    return redirect("web:document_list")
