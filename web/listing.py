"""How the documents list shows a document and the quota: for the list's page, its live
answer, and the answer to a file the upload form sent (its row is added to the list)."""

from django.http import HttpRequest
from django.template.loader import render_to_string

from documents.models import Document
from documents.services.quota import QuotaSnapshot
from pipeline.models import ImportRun
from web.runs import digest, document_state, is_active, run_summary

# The live answer of the documents list follows at most this many documents at once (the
# page's script reads it from the list's data-live-max).
LIVE_MAX_DOCUMENTS = 100


def quota_context(quota: QuotaSnapshot) -> dict:
    """The quota bar's numbers: pages used, held and left, and their shares of the limit,
    with a digest of them (the page replaces the bar when it changes)."""
    limit = max(quota.page_limit, 1)
    used_share = min(quota.pages_used * 100 / limit, 100)
    return {
        "quota": quota,
        "quota_digest": digest(quota.page_limit, quota.pages_used, quota.pages_reserved),
        "used_share": f"{used_share:.2f}",
        "held_share": f"{min(quota.pages_reserved * 100 / limit, 100 - used_share):.2f}",
    }


def row_digest(document: Document, run: ImportRun | None) -> str:
    """A fingerprint of what the document's row shows: it changes when the row does."""
    return digest(document_state(document, [run] if run else []))


def document_row(
    request: HttpRequest, document: Document, run: ImportRun | None, can: dict[str, bool]
) -> dict:
    """One document as the pages' script receives it: its row of the list and its line in
    the upload list, with their digest, whether its run is still in progress, and its
    name and state in words (said to a screen reader when its run ends)."""
    state = row_digest(document, run)
    context = {"document": document, "run": run, "can": can, "digest": state}
    return {
        "id": str(document.id),
        "digest": state,
        "active": is_active(run),
        "filename": document.filename,
        "summary": run_summary(run),
        "row": render_to_string("web/_document_row.html", context, request=request),
        "item": render_to_string("web/_upload_item_status.html", context, request=request),
    }
