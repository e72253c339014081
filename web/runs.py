"""How the member pages tell a run: its status and stage in a few words, the story of its
stages with how long each took, and what to do when it failed. Presentation only: reads
what the pipeline recorded, decides nothing."""

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from documents.models import Document
from pipeline.errors import FILE_FAULTS, run_retry_helps
from pipeline.models import ACTIVE_STATUSES, ImportRun, RunSource, RunStatus, Stage, StageAttempt

# What each stage does, for a person.
STAGE_WORDS = {
    Stage.CREATE: "Recorded the file",
    Stage.STORE: "Fetched and stored the file",
    Stage.EXTRACT: "Read the text",
    Stage.OCR: "Read the scanned pages (OCR)",
    Stage.EMBED: "Made it searchable",
    Stage.SETTLE: "Charged the pages",
}
OUTCOME_WORDS = {
    StageAttempt.Outcome.RUNNING: "in progress",
    StageAttempt.Outcome.SUCCEEDED: "done",
    StageAttempt.Outcome.TRANSIENT_ERROR: "failed, tried again",
    StageAttempt.Outcome.PERMANENT_ERROR: "failed",
    StageAttempt.Outcome.TIMEOUT: "took too long",
    StageAttempt.Outcome.ABANDONED: "interrupted",
    StageAttempt.Outcome.SKIPPED: "skipped",
    StageAttempt.Outcome.STOPPED: "stopped",
    StageAttempt.Outcome.LEASE_LOST: "interrupted",
}
# "Dead letter" is the operators' word.
STATUS_WORDS = {RunStatus.DEAD_LETTER: "Stopped"}
# Where a run came from ("Connector" is the pipeline's word): the list's filter and a
# document's page.
SOURCE_WORDS = {
    RunSource.WEB: "Upload",
    RunSource.API: "API",
    RunSource.CONNECTOR: "Connected folder",
}
# How a run that ended without success ended, after "its processing".
ENDED_WORDS = {
    RunStatus.FAILED: "failed",
    RunStatus.DEAD_LETTER: "stopped",
    RunStatus.CANCELLED: "was cancelled",
}


def status_label(run: ImportRun | None) -> str:
    if run is None:
        return "No run"
    return STATUS_WORDS.get(run.status, run.get_status_display())


def run_summary(run: ImportRun | None) -> str:
    """`Extract 120/200` while a stage counts its work, the stage alone while it does not,
    the status once the run has ended."""
    if run is None:
        return "–"
    if run.status not in ACTIVE_STATUSES:
        return status_label(run)
    stage = run.get_stage_display()
    if run.status == RunStatus.QUEUED and not run.started_at:
        return "Queued"
    if run.progress_total:
        return f"{stage} {run.progress_done}/{run.progress_total}"
    return stage


def is_active(run: ImportRun | None) -> bool:
    return run is not None and run.status in ACTIVE_STATUSES


def ended_without_success(run: ImportRun | None) -> bool:
    """The run failed, stopped or was cancelled: its version will not be processed unless
    someone acts."""
    return run is not None and run.status in ENDED_WORDS


def source_words(run: ImportRun) -> str:
    return SOURCE_WORDS.get(run.source, run.get_source_display())


def connector_file(run: ImportRun | None):
    """The file of a connected folder the run imports (its ConnectorImport, read with the
    run), or None for an upload."""
    return getattr(run, "connector_import", None) if run is not None else None


def file_fault(run: ImportRun | None) -> bool:
    """The run failed because of its file: a corrected file is what helps."""
    return run is not None and run.status == RunStatus.FAILED and run.error_code in FILE_FAULTS


def retry_offered(run: ImportRun | None) -> bool:
    return run is not None and run_retry_helps(run)


def run_advice(run: ImportRun) -> str:
    """What the person can do about a run that ended without success, in a sentence."""
    if run.status == RunStatus.CANCELLED:
        return "It was cancelled; retry it to process it after all."
    if run.status == RunStatus.DEAD_LETTER:
        return "Retry it; if it stops again, tell the people who run Paperlane."
    if file_fault(run):
        if record := connector_file(run):
            # It lives in its folder: a corrected file there is a new version, found by a sync.
            return (
                f"Retrying the same file cannot help: fix {record.path} in its folder "
                f"({record.connection.folder_path}); the next sync picks up the corrected file."
            )
        return "Retrying the same file cannot help: fix the file and upload the corrected one."
    if run.error_code == "quota_exceeded":
        return "Free pages (delete documents you no longer need) or ask for more, then retry."
    return "Retry it; if it fails again, tell the people who run Paperlane."


def _seconds(delta: timedelta) -> str:
    seconds = delta.total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest} s"


@dataclass(frozen=True)
class Step:
    stage: str
    words: str
    started_at: datetime
    took: str
    outcome: str
    ok: bool
    tries: int


def run_timeline(run: ImportRun) -> list[Step]:
    """One step per stage the run reached, in order: what it did, when it started, how long
    its tries took together, and how it ended (its last try's outcome)."""
    steps: dict[str, list[StageAttempt]] = {}
    for attempt in run.attempts_log.all():  # oldest first (the model's ordering)
        steps.setdefault(attempt.stage, []).append(attempt)
    timeline = []
    for stage, attempts in steps.items():
        last = attempts[-1]
        spent = sum(((a.finished_at or a.started_at) - a.started_at for a in attempts), timedelta())
        timeline.append(
            Step(
                stage=Stage(stage).label,
                words=STAGE_WORDS.get(stage, stage),
                started_at=attempts[0].started_at,
                took=_seconds(spent) if last.finished_at else "",
                outcome=OUTCOME_WORDS.get(last.outcome, last.outcome),
                ok=last.outcome == StageAttempt.Outcome.SUCCEEDED,
                tries=len(attempts),
            )
        )
    return timeline


def digest(*parts: object) -> str:
    """A short fingerprint of what a live part of a page shows: it changes when they do."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def run_state(run: ImportRun) -> tuple:
    """What the pages show of a run depends on: a run changes `updated_at` with each stage,
    status and progress it records."""
    return (
        run.id,
        run.status,
        run.stage,
        run.progress_done,
        run.progress_total,
        run.error_code,
        run.updated_at,
    )


def document_state(document: Document, runs: list[ImportRun]) -> tuple:
    """What a document's row in the list depends on."""
    return (
        document.filename,
        document.page_count,
        document.chunk_count,
        document.text_chars,
        tuple(document.unreadable_pages or ()),
        tuple(document.textless_pages or ()),
        tuple(run_state(run) for run in runs),
    )
