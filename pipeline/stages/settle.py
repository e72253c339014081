"""settle: charge the actual page count once, make the version searchable, and mark the
run succeeded, in one transaction: what is found is what was charged."""

from core.errors import QuotaExceeded
from documents.services.content import document_make_searchable
from documents.services.quota import quota_settle
from pipeline.errors import PermanentError
from pipeline.stages.context import StageContext


def run(ctx: StageContext) -> None:
    # The claim loaded the document as extract left it: its page count is current.
    document = ctx.document
    if document.page_count is None:
        raise PermanentError("The page count is missing; retry the run.", code="pages_missing")
    try:
        with ctx.complete():
            quota_settle(
                reservation=ctx.run.reservation, document=document, pages=document.page_count
            )
            # Its chunks become searchable with the charge (and the version it supersedes
            # leaves search), or, if a cancel took the run first, neither happens.
            document_make_searchable(document=document)
    except QuotaExceeded as exc:
        raise PermanentError(
            f"The document has {document.page_count} pages, more than were reserved, "
            f"and your quota has only {exc.extra['pages_available']} pages left.",
            code="quota_exceeded",
        ) from exc
