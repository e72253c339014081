"""What members do to a document from its page or the list: retry or cancel its run, or
delete it (after a page that says what deleting does). Thin callers of the run and
deletion services, which check the member's role."""

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from core.errors import Forbidden, NotFound, ServiceError
from documents.roles import Ability
from documents.selectors import document_get, document_pages_charged, document_was_deleted
from pipeline.models import ACTIVE_STATUSES
from pipeline.selectors import documents_with_latest_runs, run_get
from pipeline.services.deletion import document_delete
from pipeline.services.people import run_cancel, run_retry
from pipeline.services.transitions import Actor
from web.organisation_views import current_membership, forbidden, role_refusal


def _back(request: HttpRequest) -> str:
    """Where an action's form asked to go back to, if it is a page of this site."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return reverse("web:document_list")


@login_required
@require_POST
def run_action_view(request: HttpRequest, run_id: uuid.UUID, action: str) -> HttpResponse:
    """Retry or cancel one of the member's organisation's runs, then back to the page."""
    membership = current_membership(request)
    try:
        run = run_get(organisation=membership.organisation, run_id=run_id)
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
    return redirect(_back(request))


@login_required
@require_http_methods(["GET", "POST"])
def document_delete_view(request: HttpRequest, document_id: uuid.UUID) -> HttpResponse:
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
    # Said before the page offers a button that would be refused.
    if request.method != "POST" and (refused := role_refusal(request, membership, Ability.DELETE)):
        return refused
    if request.method != "POST":
        [(document, run)] = documents_with_latest_runs(documents=[document])
        context = {
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
