"""How a stage says what went wrong, and what a run's error means for retrying it. The
engine decides what happens next."""

from pipeline.models import RETRYABLE_STATUSES, ImportRun, RunStatus


class StageError(Exception):
    code = "stage_error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code


class PermanentError(StageError):
    """Retrying cannot help (bad input, over quota): the run fails at once.

    The message is shown to the person who uploaded the document.
    """

    code = "permanent_error"


class TransientError(StageError):
    """Worth trying again later (network, timeouts, a busy provider)."""

    code = "transient_error"


# The error code of a try that failed while the embedding provider was in an outage: the
# run waits for the provider (the dashboard counts the runs that carry it).
PROVIDER_OUTAGE = "embedding_provider_outage"


class ProviderOutage(TransientError):
    """The provider failed while its breaker is open (core/provider_breaker.py): it is
    down for every run, not failing this one's input, so the try is not counted against
    the run's tries or its retry window; the stage is tried again when the pause ends."""

    code = PROVIDER_OUTAGE

    def __init__(self, message: str, *, pause: float) -> None:
        super().__init__(message)
        # Seconds until the breaker lets the stage's workers try the provider again.
        self.pause = pause


class LeaseLost(Exception):
    """Another worker (or the sweeper, or a cancel) took the run from this one."""


# What a run that failed for these reasons would meet again: the file itself is the
# problem (damaged, protected, over a limit), so a retry of the same bytes cannot help.
FILE_FAULTS = frozenset(
    {
        "damaged_pdf",
        "truncated_pdf",
        "encrypted_pdf",
        "pdf_too_complex",
        "damaged_docx",
        "docx_too_large",
        "docx_too_compressed",
        "damaged_image",
        "image_too_large",
        "no_pages",
        "too_many_pages",
        "too_much_text",
        "too_many_chunks",
        "unsupported_type",
        "empty_file",
        "extract_crashed",
        "extract_memory_limit",
        "extract_time_limit",
        "extract_cpu_limit",
    }
)


def run_retry_helps(run: ImportRun) -> bool:
    """Whether retrying the ended run can lead anywhere else: not when its own file made
    it fail (a corrected file must be uploaded instead), nor when it succeeded."""
    if run.status not in RETRYABLE_STATUSES:
        return False
    return run.status != RunStatus.FAILED or run.error_code not in FILE_FAULTS
