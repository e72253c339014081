"""settle: charge the actual page count once and mark the run succeeded."""

from documents.errors import QuotaExceeded
from documents.models import Document
from documents.services.quota import quota_settle
from jobs.errors import PermanentError


def run(ctx) -> None:
    document = Document.objects.get(id=ctx.document.id)
    if document.page_count is None:
        raise PermanentError("The page count is missing; retry the run.", code="pages_missing")
    try:
        with ctx.complete():
            quota_settle(run=ctx.run, document=document, pages=document.page_count)
    except QuotaExceeded as exc:
        raise PermanentError(
            f"The document has {document.page_count} pages, more than were reserved, "
            f"and your quota has only {exc.extra['pages_available']} pages left.",
            code="quota_exceeded",
        ) from exc
