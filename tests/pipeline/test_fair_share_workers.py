"""Fair share of the extract and OCR workers, with real worker processes (`run_workers`,
default counts: two of each), real Redis and PostgreSQL: one organisation's heavy
documents leave a worker for another's (pipeline/fair_share.py)."""

import io
import time

import pytest
from PIL import Image, ImageDraw, ImageFont

from documents import reading
from pipeline.fair_share import HEAVY_PAGES
from pipeline.models import TERMINAL_STATUSES, ImportRun, RunStatus, RunTransition, StageAttempt
from tests.support import hostile, scans
from tests.support.files import make_pdf
from tests.support.pipeline import running_workers, wait_for, wait_terminal
from tests.support.uploads import accepted_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# run_workers with the shipped worker counts (extract 2).
DEFAULT_COUNTS = ""


def _seconds_to_succeed(run) -> float:
    succeeded = RunTransition.objects.get(run_id=run.id, to_status=RunStatus.SUCCEEDED)
    return (succeeded.created_at - run.created_at).total_seconds()


def test_two_heavy_word_files_of_one_organisation_leave_a_worker_for_anothers_pdf(
    api, other_api, monkeypatch
):
    # 30 MiB of empty paragraphs each, charged 30 pages by their markup: several seconds
    # of parsing apiece. (Accept would refuse markup that compresses this well; here it is
    # let through to be a heavy document that is paid for.)
    monkeypatch.setattr(reading, "DOCX_MAX_COMPRESSION_RATIO", 10_000)
    heavy = hostile.docx_of_empty_paragraphs(30)
    heavies = [accepted_run(api, heavy, name=f"heavy-{n}.docx") for n in range(2)]
    assert all(run.reservation.pages >= HEAVY_PAGES for run in heavies)

    with running_workers(concurrency=DEFAULT_COUNTS):
        wait_for(
            lambda: StageAttempt.objects.filter(run__in=heavies, stage="extract").exists(),
            timeout=60,
            what="a heavy document's extraction to start",
        )
        time.sleep(1)  # both extract workers have looked at the heavy documents by now
        single = accepted_run(other_api, make_pdf(1), name="single.pdf")
        finished = wait_terminal([single.id], timeout=60)[single.id]
        assert finished.status == "succeeded", finished.error_message
        waited = _seconds_to_succeed(finished)
        # The heavy ones ran one after the other, and both were paid for and ended.
        ended = wait_terminal([run.id for run in heavies], timeout=120)

    assert waited < 5, f"the other organisation's one-page PDF took {waited:.1f} s"
    assert all(run.status == "succeeded" for run in ended.values()), ended
    attempts = StageAttempt.objects.filter(run__in=heavies, stage="extract").order_by("started_at")
    first, second = attempts
    assert second.started_at >= first.finished_at


def long_scan(pages: int) -> bytes:
    """An image-only PDF of `pages` small scanned pages, a line of words on each: every
    page goes to OCR (a few tenths of a second each)."""
    font = ImageFont.truetype(str(scans.SANS), 28)
    images = []
    for number in range(1, pages + 1):
        image = Image.new("L", (850, 550), 255)
        ImageDraw.Draw(image).text((60, 80), f"Archive box {number} of the harbour office", 0, font)
        images.append(image.convert("1"))
    out = io.BytesIO()
    images[0].save(out, "PDF", resolution=100, save_all=True, append_images=images[1:])
    return out.getvalue()


def test_two_500_page_scans_of_one_organisation_leave_an_ocr_worker_for_anothers_scan(
    api, other_api
):
    scan = long_scan(500)
    heavies = [accepted_run(api, scan, name=f"archive-{n}.pdf") for n in range(2)]
    assert all(run.reservation.pages == 500 for run in heavies)

    ids = [run.id for run in heavies]

    def both_at_ocr_one_being_read() -> bool:
        at_ocr = ImportRun.objects.filter(id__in=ids, stage="ocr")
        return at_ocr.count() == 2 and at_ocr.filter(progress_done__gt=0).exists()

    with running_workers(concurrency=DEFAULT_COUNTS):
        # Both wait for OCR (one read, one put back: the organisation may hold one of the
        # two OCR workers) before the other organisation's page arrives.
        wait_for(both_at_ocr_one_being_read, timeout=120, what="both long scans at OCR")
        page = scans.as_pdf([scans.make_scan("sans-200")])
        single = accepted_run(other_api, page, name="one.pdf")
        finished = wait_terminal([single.id], timeout=90)[single.id]
        still = dict(
            ImportRun.objects.filter(id__in=ids)
            .exclude(status__in=TERMINAL_STATUSES)
            .values_list("id", "stage")
        )

    assert finished.status == "succeeded", finished.error_message
    assert StageAttempt.objects.filter(run=finished, stage="ocr", outcome="succeeded").exists()
    # The long scans were still being read: the page did not wait for them.
    assert sorted(still.values()) == ["ocr", "ocr"], still
    waited = _seconds_to_succeed(finished)
    assert waited < 60, f"the other organisation's one-page scan took {waited:.1f} s"
    # Only one of the two was ever read: the other was put back, and waited.
    read = StageAttempt.objects.filter(run__in=ids, stage="ocr").values("run").distinct()
    assert read.count() == 1
