"""What a run's error means for retrying it: the codes that blame the file are codes a
run can end with, and only those keep a retry from being offered."""

import pytest

from pipeline.errors import FILE_FAULTS, run_retry_helps
from pipeline.models import ImportRun, RunStatus
from tests.support.codes import PIPELINE_APPS, codes_in_source


def test_every_code_that_blames_the_file_is_one_a_run_can_end_with():
    # A misspelt or retired code would never match a run, and Retry would be offered on
    # a file that can only fail again.
    written = codes_in_source(PIPELINE_APPS)

    assert FILE_FAULTS - set(written) == set()


@pytest.mark.parametrize(
    ("status", "code", "helps"),
    [
        (RunStatus.FAILED, "damaged_pdf", False),
        (RunStatus.FAILED, "quota_exceeded", True),
        (RunStatus.DEAD_LETTER, "damaged_pdf", True),
        (RunStatus.CANCELLED, "", True),
        (RunStatus.SUCCEEDED, "", False),
        (RunStatus.PROCESSING, "", False),
    ],
)
def test_a_retry_helps_unless_the_run_succeeded_is_running_or_its_file_failed(status, code, helps):
    assert run_retry_helps(ImportRun(status=status, error_code=code)) is helps
