"""extract: clean text and the real page count (formats), in a child process
under memory and CPU limits, then the quota held for the run is set to the real count.
The bytes are first checked against the size and SHA-256 taken when they were accepted.

Damaged, encrypted or unreadable input, and a document over a limit, are
permanent errors with a message the uploader can act on. A document whose real
page count no longer fits the quota fails here, before any embedding work, and
its pages are given back: extraction stops as soon as the pages it has counted
pass what the organisation can still pay for (the pages held for the run and
those available when the stage starts, read once), before it reads the text of
the rest; the count at the end is checked again as the reservation is resized.
"""

import logging

from django.conf import settings

from core.errors import QuotaExceeded, ServiceError
from core.isolation import (
    ChildFailed,
    LimitExceeded,
    Limits,
    isolated_cpu_seconds,
    run_isolated,
)
from core.rate_limit import RateLimitUnavailable
from documents.models import QuotaReservation
from documents.reading import extract_limits
from documents.services.content import document_text_save
from documents.services.quota import quota_get, quota_resize
from formats import PagesOverBudget, extract
from pipeline.errors import PermanentError
from pipeline.models import Stage
from pipeline.services.admission import admission_hold_failed_work
from pipeline.stages.context import StageContext
from pipeline.stages.ocr import ocr_languages, ocr_unavailable
from pipeline.stages.stored_file import read_stored

logger = logging.getLogger(__name__)

# Documents one extraction child extracts, one after another, before a new one takes over
# (1: a new child per document). Each gets the CPU budget; a child whose memory has grown
# is replaced sooner, and a document over the memory limit is judged again in a new child.
CHILD_DOCUMENTS = 100
# The CPU a document's extraction may use: this much, and this much more for each page
# held for it, up to PAPERLANE_EXTRACT_CPU_SECONDS. What a document may cost the workers
# follows what it was charged for (a page of text takes PDFium some 10 ms, a MiB of
# Word markup, charged a page, about 0.3 s); pipeline/fair_share.py calls a document
# heavy from the same pages.
EXTRACT_CPU_BASE_SECONDS = 2
EXTRACT_CPU_SECONDS_PER_PAGE = 1


def isolation_limits(*, timeout: int, pages: int | None = None) -> Limits:
    """The child's limits for a document held for `pages` (None: the most any may use).
    Its wall clock ends before the stage's own `timeout` (less a tenth, at least 10 s,
    for reading the bytes and saving the text): a document that takes too long then
    fails at once as over the limit, instead of timing the stage out and being tried
    again."""
    cpu = settings.PAPERLANE_EXTRACT_CPU_SECONDS
    if pages is not None:
        cpu = min(cpu, EXTRACT_CPU_BASE_SECONDS + EXTRACT_CPU_SECONDS_PER_PAGE * max(pages, 1))
    return Limits(
        memory_bytes=settings.PAPERLANE_EXTRACT_MEMORY_MB * 1024 * 1024,
        cpu_seconds=cpu,
        wall_seconds=max(min(cpu * 1.5 + 10, timeout - max(10, timeout / 10)), 1),
    )


def _held(reservation: QuotaReservation | None) -> int:
    held = reservation is not None and reservation.status == QuotaReservation.Status.HELD
    return reservation.pages if held else 0


def _reserved(reservation: QuotaReservation | None) -> int | None:
    """The pages the document was weighed at (held, or charged by an earlier run)."""
    return reservation.pages if reservation is not None else None


def _over_quota(*, pages: str, held: int, available: int) -> PermanentError:
    return PermanentError(
        f"The document has {pages}, more than were held for it at upload ({held}), and "
        f"your quota has only {available} pages left. Nothing was charged.",
        code="quota_exceeded",
    )


def run(ctx: StageContext) -> None:
    document = ctx.document
    data = read_stored(document)
    held = _held(ctx.run.reservation)
    available = quota_get(organisation_id=ctx.run.organisation_id).pages_available

    started = isolated_cpu_seconds()
    try:
        extracted = _extract(ctx, document, data, held=held, available=available)
    except (PermanentError, ServiceError):
        # The document failed, and what it cost the workers is its organisation's to wait
        # for (pipeline/services/admission.py).
        _hold_failed_work(ctx, isolated_cpu_seconds() - started)
        raise

    if not _has_pages_to_read(ctx, extracted):
        ctx.skip(Stage.OCR)
    try:
        with ctx.complete():
            document_text_save(document=document, extracted=extracted)
            quota_resize(reservation=ctx.run.reservation, pages=extracted.page_count)
    except QuotaExceeded as exc:
        raise _over_quota(
            pages=f"{extracted.page_count} pages",
            held=held,
            available=exc.extra["pages_available"],
        ) from exc


def _has_pages_to_read(ctx: StageContext, extracted) -> bool:
    """Whether the run goes through OCR: pages without text, and an engine that reads the
    organisation's languages here (otherwise those pages stay textless, and say why)."""
    if not extracted.textless_pages:
        return False
    problem = ocr_unavailable(ocr_languages(ctx.run.organisation))
    if problem:
        logger.info(
            "run %s: %s pages without text, not read: %s",
            ctx.run.id,
            len(extracted.textless_pages),
            problem,
        )
    return problem is None


def _hold_failed_work(ctx: StageContext, cpu_seconds: float) -> None:
    try:
        admission_hold_failed_work(organisation_id=ctx.run.organisation_id, cpu_seconds=cpu_seconds)
    except RateLimitUnavailable:
        logger.warning("could not hold the failed work of run %s", ctx.run.id)


def _extract(ctx: StageContext, document, data: bytes, *, held: int, available: int):
    """The document's text from the isolated child, or the PermanentError that says why
    not."""
    try:
        return run_isolated(
            extract,
            document.kind,
            data,
            extract_limits(),
            limits=isolation_limits(timeout=ctx.timeout, pages=_reserved(ctx.run.reservation)),
            on_progress=ctx.progress,
            reuse=CHILD_DOCUMENTS,
            page_budget=held + available,
        )
    except LimitExceeded as exc:
        raise PermanentError(
            f"Extracting the text {exc}, the limit for a document of its size.",
            code=f"extract_{exc.limit}_limit",
        ) from exc
    except ChildFailed as exc:
        if exc.exitcode is None:  # no child could be started: not the document's doing
            raise
        # A fresh child died reading it (a crash of the native PDF reader, say): the
        # same file would crash it again. Only this document fails; the worker goes on.
        raise PermanentError(
            f"Reading the document's text crashed the reader ({exc}). The file may be "
            "damaged, or need more memory than one document may use; saving it again from "
            "its application (or printing it to a new PDF) may help.",
            code="extract_crashed",
        ) from exc
    except PagesOverBudget as exc:
        pages = f"{exc.counted} pages" if exc.complete else f"more than {exc.budget} pages"
        raise _over_quota(pages=pages, held=held, available=available) from exc
