"""Fair share of the extract workers, with real worker processes (`run_workers`, default
counts: two extract workers), real Redis and PostgreSQL: one organisation's heavy
documents leave a worker for another's (pipeline/fair_share.py)."""

import time

import pytest

from documents import reading
from pipeline.fair_share import HEAVY_PAGES
from pipeline.models import RunStatus, RunTransition, StageAttempt
from tests.support import hostile
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
