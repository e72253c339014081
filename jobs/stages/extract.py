"""extract: clean text and the real page count (documents.formats), in a child process
under memory and CPU limits, then the quota held for the run is set to the real count.
The bytes are first checked against the size and SHA-256 taken when they were accepted.

Damaged, encrypted or unreadable input, and a document over a limit, are
permanent errors with a message the uploader can act on. A document whose real
page count no longer fits the quota fails here, before any embedding work, and
its pages are given back.
"""

from django.conf import settings

from core.errors import QuotaExceeded
from documents.formats import extract, extract_limits
from documents.services.content import document_text_save
from documents.services.quota import quota_resize
from jobs.errors import PermanentError
from jobs.isolation import LimitExceeded, Limits, run_isolated
from jobs.stages.context import StageContext
from jobs.stages.stored_file import read_stored

PROGRESS_EVERY_PAGES = 10


def isolation_limits() -> Limits:
    cpu = settings.PAPERLANE_EXTRACT_CPU_SECONDS
    return Limits(
        memory_bytes=settings.PAPERLANE_EXTRACT_MEMORY_MB * 1024 * 1024,
        cpu_seconds=cpu,
        wall_seconds=cpu * 1.5 + 10,
    )


def run(ctx: StageContext) -> None:
    document = ctx.document
    data = read_stored(document)

    def on_page(done: int, total: int) -> None:
        if done == total or done % PROGRESS_EVERY_PAGES == 0:
            ctx.progress(done, total)

    try:
        extracted = run_isolated(
            extract,
            document.kind,
            data,
            extract_limits(),
            limits=isolation_limits(),
            on_progress=on_page,
            reuse=settings.PAPERLANE_EXTRACT_CHILD_DOCUMENTS,
        )
    except LimitExceeded as exc:
        raise PermanentError(
            f"Extracting the text {exc}, the limit for one document.",
            code=f"extract_{exc.limit}_limit",
        ) from exc

    try:
        with ctx.complete():
            document_text_save(
                document=document, text=extracted.text, page_count=extracted.page_count
            )
            quota_resize(reservation=ctx.run.reservation, pages=extracted.page_count)
    except QuotaExceeded as exc:
        raise PermanentError(
            f"The document has {extracted.page_count} pages, more than were held for it "
            f"at upload, and your quota has only {exc.extra['pages_available']} pages left.",
            code="quota_exceeded",
        ) from exc
