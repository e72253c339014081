"""The small JSON answers that keep the documents list and a document's page up to date
while work is in progress, polled by the pages' script (static/js/documents.js). A
signed-out session gets 401 and a document gone 404, in JSON: the script stops asking and
says why."""

import uuid

from django.http import HttpRequest, JsonResponse
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET

from core.errors import NotFound
from documents.roles import abilities
from documents.selectors import document_get, document_list
from documents.services.quota import quota_get
from pipeline.selectors import document_runs, documents_with_latest_runs
from web.document_parts import RUNS_SHOWN, DocumentPage, part_digests, parts_render
from web.json_access import json_member_required, json_refusal
from web.listing import LIVE_MAX_DOCUMENTS, document_row, quota_context
from web.organisation_views import current_membership
from web.runs import digest, is_active, run_summary

GONE = "This document is not there any more: it was deleted, or moved out of your reach."


@require_GET
@json_member_required
def document_live_view(request: HttpRequest, document_id: uuid.UUID) -> JsonResponse:
    """What changed on a document's page, for the page's own query (`?page=`, `?chunks=`)
    and the digests of the parts it shows (`?have=status:<digest>`, one per part):
    `digest` and `active` always; `parts` (each part's digest and HTML) only for the
    parts whose digest differs, with `summary`, the run's state in words. Nothing is
    rendered, and no text or chunk read, when nothing changed."""
    membership = current_membership(request)
    try:
        document = document_get(organisation=membership.organisation, document_id=document_id)
    except NotFound:
        return json_refusal(GONE, code="not_found", status=404)
    page = DocumentPage(
        request=request,
        membership=membership,
        document=document,
        runs=document_runs(document=document, limit=RUNS_SHOWN),
    )
    digests = part_digests(page)
    held = {}  # part name -> the digest the page holds, from each `have=name:digest`
    for value in request.GET.getlist("have"):
        name, _, fingerprint = value.partition(":")
        held[name] = fingerprint
    changed = [name for name, fingerprint in digests.items() if held.get(name) != fingerprint]
    answer = {"digest": digest(sorted(digests.items())), "active": is_active(page.latest)}
    if changed:
        html = parts_render(page, changed)
        answer["parts"] = {name: {"digest": digests[name], "html": html[name]} for name in changed}
        # In words, for the page to say when the run ends.
        answer["summary"] = f"{document.filename}: {run_summary(page.latest)}"
    return JsonResponse(answer)


@require_GET
@json_member_required
def documents_live_view(request: HttpRequest) -> JsonResponse:
    """The rows of the documents named by `?id=` (at most LIVE_MAX_DOCUMENTS; another
    organisation's or a deleted one is left out), the quota bar (and its digest) and how
    many documents the organisation has (`total`, and `count` in words), as the list
    shows them."""
    membership = current_membership(request)
    organisation = membership.organisation
    wanted = request.GET.getlist("id")
    if len(wanted) > LIVE_MAX_DOCUMENTS:
        return json_refusal(
            f"Ask for at most {LIVE_MAX_DOCUMENTS} documents at once.",
            code="invalid_request",
            status=400,
        )
    try:
        ids = [uuid.UUID(value) for value in wanted]
    except ValueError:
        return json_refusal("Each id must be a document's id.", code="invalid_request", status=400)
    documents = document_list(organisation=organisation).filter(id__in=ids)
    can = abilities(membership.role)
    rows = documents_with_latest_runs(documents=list(documents))
    quota = quota_context(quota_get(organisation_id=organisation.id))
    total = document_list(organisation=organisation).count()
    return JsonResponse(
        {
            "documents": [document_row(request, document, run, can) for document, run in rows],
            "quota": render_to_string("web/_quota.html", quota, request=request),
            "quota_digest": quota["quota_digest"],
            "total": total,
            "count": render_to_string("web/_document_count.html", {"total": total}),
        }
    )
