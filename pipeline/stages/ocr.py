"""ocr: read the pages extraction found without text (a scan, a fax, a photo of paper).

A run goes through this stage only when extract found such pages and OCR can read here
(`ocr_unavailable`); every other run passes over it (`StageContext.skip`), paying
nothing. Each page is drawn (a PDF's by PDFium; a picture's frame as it is, upright)
and read by the OCR engine in the isolated child, one page a call under its own CPU,
wall-clock and memory limits (formats/page_reading.py):
a page that crashes the engine or outlasts its limits is recorded as unread, with why,
and the others are read. Each page's reading commits with the run's progress
(`OCR 12/50`), so a worker stopped mid-document goes on after the last page it finished,
and no page is read twice for a version. At the end the pages' text takes its place in
the version's text, in page order, before embed chunks it. Pages were charged at extract:
nothing is charged here.
"""

import functools
import logging
import tempfile

from django.conf import settings

from core.errors import ServiceError
from core.isolation import ChildFailed, LimitExceeded, Limits, run_isolated
from documents.models import Document, Organisation, PageReading
from documents.services.content import document_text_add_readings
from pipeline.stages.context import StageContext
from pipeline.stages.stored_file import read_stored

logger = logging.getLogger(__name__)

# Pages are drawn for OCR at formats.ocr.OCR_DPI, with at most this many pixels (a page
# that states a huge size is drawn smaller).
OCR_MAX_PIXELS = 40_000_000
# One page's limits in the child.
PAGE_CPU_SECONDS = 60
PAGE_MEMORY_MB = 1536
# Pages one child reads, one after another, before a new one takes over.
CHILD_PAGES = 50


def languages_of(chosen: str) -> tuple[str, ...]:
    """Languages written as Tesseract names them, joined by "+" ("eng+deu")."""
    return tuple(code.strip() for code in chosen.replace(",", "+").split("+") if code.strip())


def ocr_languages(organisation: Organisation) -> tuple[str, ...]:
    """The languages the organisation's scans are read in: its own choice, else the
    server's PAPERLANE_OCR_LANGUAGES."""
    return languages_of(organisation.ocr_languages or settings.PAPERLANE_OCR_LANGUAGES)


# The OCR engine's modules (numpy, Pillow, Tesseract) are imported where a page is read or
# the engine asked about, not with the stage list: every process that loads the stages (the
# web, the extraction child, whose memory limit counts them) would carry them otherwise.


@functools.cache
def ocr_engine_unavailable() -> str | None:
    """Why this process has no OCR engine (None when it has one). Asked once."""
    from formats.ocr import engine_problem

    return engine_problem()


@functools.cache
def ocr_unavailable(languages: tuple[str, ...]) -> str | None:
    """Why OCR cannot read `languages` in this process (no engine, a missing language
    pack), or None when it can. Asked once per process and set of languages."""
    from formats.ocr import ocr_problem

    return ocr_problem(languages)


def page_limits() -> Limits:
    return Limits(
        memory_bytes=PAGE_MEMORY_MB * 1024 * 1024,
        cpu_seconds=PAGE_CPU_SECONDS,
        wall_seconds=PAGE_CPU_SECONDS * 1.5 + 10,
    )


def run(ctx: StageContext) -> None:
    document = ctx.document
    languages = ocr_languages(ctx.run.organisation)
    # Read here: extract wrote them after this run's document was loaded with the claim.
    pages = sorted(
        Document.objects.filter(id=document.id).values_list("textless_pages", flat=True).get()
    )
    read = set(
        PageReading.objects.filter(document=document, version=document.version).values_list(
            "page", flat=True
        )
    )
    total = len(pages)
    ctx.progress(len(read), total)
    with tempfile.TemporaryFile() as file:
        # Written once; the child reads it through its descriptor, never copied per page.
        file.write(read_stored(document))
        file.flush()
        for done, page in enumerate(pages, start=1):
            if page in read:
                continue
            ctx.check()
            reading = _read(document.kind, page, languages, file)
            reading.document, reading.version = document, document.version
            with ctx.checkpoint(done, total):
                PageReading.objects.bulk_create([reading], ignore_conflicts=True)
    with ctx.complete():
        document_text_add_readings(document=document)


def _read(kind: str, page: int, languages: tuple[str, ...], file) -> PageReading:
    """Page `page` (from 1) read in the isolated child; its problem recorded instead when
    the page cannot be drawn or read within its limits."""
    from formats.ocr import OCR_DPI
    from formats.page_reading import read_page

    reading = PageReading(page=page)
    try:
        found = run_isolated(
            read_page,
            kind,
            page - 1,
            dpi=OCR_DPI,
            max_pixels=OCR_MAX_PIXELS,
            languages=languages,
            file=file,
            limits=page_limits(),
            reuse=CHILD_PAGES,
        )
    except LimitExceeded as exc:
        reading.problem = f"Reading this page {exc}, the limit for one page."
    except ChildFailed as exc:
        if exc.exitcode is None:  # no child could be started: not the page's doing
            raise
        reading.problem = f"Reading this page crashed the OCR engine ({exc})."
    except ServiceError as exc:  # a page that cannot be drawn
        reading.problem = exc.message
    else:
        reading.text, reading.confidence = found.text, found.confidence
    if reading.problem:
        logger.info("page %s could not be read by OCR: %s", page, reading.problem)
    return reading
