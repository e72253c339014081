"""Run one stage of one run: claim, work, record, hand over.

`execute_stage` is the RQ job function. It claims the stage with a
conditional UPDATE (a duplicate or late delivery drops itself), holds a lease
while the stage body works, records every try as a StageAttempt, lets the
stage commit its result together with "next stage due", and returns that next
delivery: the job's `on_success` callback enqueues it (pipeline/dispatch.py).
Nothing here enqueues. Errors are classified here, once, for every stage.
"""

import logging
import time
import traceback
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import (
    DatabaseError,
    DataError,
    InterfaceError,
    OperationalError,
    close_old_connections,
    connection,
    transaction,
)
from redis.exceptions import RedisError

from core.errors import ServiceError
from core.isolation import isolated_cpu_seconds
from core.text import storable
from pipeline import broker
from pipeline.dispatch import next_delivery
from pipeline.errors import LeaseLost, PermanentError, ProviderOutage, TransientError
from pipeline.hosts import process_name
from pipeline.lease import keeper
from pipeline.logcontext import run_log_context
from pipeline.models import ImportRun, StageAttempt
from pipeline.services.workers import (
    Claim,
    Failure,
    run_claim,
    run_complete_stage,
    run_record_failure,
    run_record_lost_hold,
    run_release,
    run_set_progress,
    run_still_held,
)
from pipeline.stage_list import StageSpec, stage_spec

logger = logging.getLogger(__name__)

Outcome = StageAttempt.Outcome

# Seconds between two progress writes of one stage.
PROGRESS_INTERVAL = 0.25

# Within this long of its claim, which proved the run is this worker's, a stage's first
# paid step does not ask the database again: a run cancelled in that moment costs at
# most that one call (a one-batch document, most documents, asks nothing).
CLAIM_PROVES_SECONDS = 0.5

# A database connection the previous job used this recently is taken as alive, without
# the health check (a SELECT 1 round trip) Django would send before the job's first
# query; one that died meanwhile (the server restarted) fails the claim, which is tried
# once more on a new connection.
FRESH_CONNECTION_SECONDS = 5.0

# Errors of the infrastructure rather than the document: always worth a retry.
TRANSIENT_TYPES = (
    TransientError,
    OperationalError,
    InterfaceError,
    RedisError,
    ConnectionError,
    TimeoutError,
)


class ClaimedStage:
    """The StageContext a stage body gets: the claimed run and ways to report and finish."""

    def __init__(self, claim: Claim, spec: StageSpec) -> None:
        self.claim = claim
        self.spec = spec
        self.completed = False
        # The run as the stage's own transaction left it.
        self.finished_run: ImportRun | None = None
        # The stage's CPU: this thread's, and its isolated children's (the extraction).
        self._cpu_started = time.thread_time() + isolated_cpu_seconds()
        self._progress_at = time.monotonic()
        self._claimed_at = time.monotonic()
        # Optional stages the run does not go through (`skip`).
        self._skip: frozenset[str] = frozenset()

    def note_cpu(self) -> None:
        spent = time.thread_time() + isolated_cpu_seconds() - self._cpu_started
        self.claim.attempt.cpu_ms = int(spent * 1000)

    @property
    def run(self) -> ImportRun:
        return self.claim.run

    @property
    def document(self):
        return self.claim.run.document

    @property
    def timeout(self) -> int:
        return self.spec.timeout

    def check(self) -> None:
        # The keeper notices a lost lease only at its next renewal (a third of the lease
        # later): before something slow or paid, the database says whether it is ours.
        self._check_kept()
        if self._claimed_at and time.monotonic() - self._claimed_at < CLAIM_PROVES_SECONDS:
            self._claimed_at = 0.0  # only the first step
            return
        if not run_still_held(claim=self.claim):
            raise LeaseLost(str(self.run.id))

    def _check_kept(self) -> None:
        # What the keeper knows; the conditional UPDATE that follows proves the rest.
        if keeper.lost:
            raise LeaseLost(str(self.run.id))

    def progress(self, done: int, total: int) -> None:
        self._check_kept()
        now = time.monotonic()
        # Nobody sees a count that lasts milliseconds: a short stage (most small
        # documents) writes none, a long one at most one every PROGRESS_INTERVAL.
        if now - self._progress_at < PROGRESS_INTERVAL:
            return
        self._progress_at = now
        run_set_progress(claim=self.claim, done=done, total=total)

    @contextmanager
    def checkpoint(self, done: int, total: int) -> Iterator[None]:
        self._check_kept()
        with transaction.atomic():
            # The progress is written first: its conditional UPDATE locks the run and
            # proves the hold is still ours, as completing does, so the rows the stage
            # saves in the block commit only while the run is this worker's (a cancel or
            # a delete that took the run first leaves them unwritten).
            run_set_progress(claim=self.claim, done=done, total=total)
            yield
        self._progress_at = time.monotonic()

    @contextmanager
    def complete(self) -> Iterator[None]:
        self._check_kept()
        with transaction.atomic():
            # Completing first locks the run before the stage's own rows (the order
            # cancel uses too) and proves the hold is still ours; the stage's rows
            # then commit with it, or nothing does.
            self._finish()
            yield
        self.completed = True

    def skip(self, stage: str) -> None:
        self._skip |= {stage}

    def finish(self) -> None:
        """Complete a stage that has nothing of its own to save: one statement, no
        transaction around it."""
        self._check_kept()
        self._finish()
        self.completed = True

    def _finish(self) -> None:
        # The attempt's CPU and end are taken as the stage completes, before the
        # stage's own rows are written in the same transaction.
        self.note_cpu()
        self.finished_run = run_complete_stage(claim=self.claim, skip=self._skip)


def worker_name() -> str:
    job = broker.current_job()
    if job is not None and job[1]:
        return job[1]
    return process_name()


def execute_stage(run_id: str, stage: str) -> dict:
    """RQ job: do `stage` of run `run_id` if it is due.

    Returns what happened and, once the stage's outcome has committed, what the run
    waits for next (the next stage, or the retry): the job's `on_success` callback
    enqueues it under its deterministic job id, and if the worker dies before that,
    the sweeper delivers it. Log lines written meanwhile carry the run, the stage
    and (once claimed) the attempt number.
    """
    with run_log_context(run_id=run_id, stage=stage):
        return _execute_stage(run_id, stage)


def _execute_stage(run_id: str, stage: str) -> dict:
    _connection_for_job()
    job = broker.current_job()
    job_id = job[0] if job is not None else f"direct-{uuid.uuid4()}"
    claim = _claim(run_id=uuid.UUID(run_id), stage=stage, job_id=job_id, worker=worker_name())
    if claim is None:
        logger.info(
            "run %s: %s is not due or is held elsewhere; dropping %s", run_id, stage, job_id
        )
        return {"outcome": "skipped", "next": None}
    spec = stage_spec(stage)
    with run_log_context(attempt=claim.attempt.number):
        keeper.hold(run_id=claim.run.id, owner=claim.owner, timeout=spec.timeout)
        try:
            outcome, run = _run_body(claim, spec)
        finally:
            keeper.release()
            close_old_connections()
            _used[0] = time.monotonic()
    return {"outcome": outcome, "next": next_delivery(run) if run is not None else None}


_used = [float("-inf")]  # when this process's connection last finished a stage


def _connection_for_job() -> None:
    """What Django does between requests (close a connection that errored or is past
    CONN_MAX_AGE), without the health check for one used moments ago."""
    close_old_connections()
    if connection.connection is not None and time.monotonic() - _used[0] < FRESH_CONNECTION_SECONDS:
        connection.health_check_done = True


def _claim(**kwargs) -> Claim | None:
    try:
        return run_claim(**kwargs)
    except (OperationalError, InterfaceError):
        # The connection died while idle: once more on a new one (a second failure is
        # the database's, and RQ records it; the sweeper delivers the stage again).
        logger.warning("run %s: the database connection was lost; claiming again", kwargs["run_id"])
        connection.close()
        return run_claim(**kwargs)


def _run_body(claim: Claim, spec: StageSpec) -> tuple[str, ImportRun | None]:
    context = ClaimedStage(claim, spec)
    try:
        spec.run(context)
        if not context.completed:
            # Nothing of its own to save: completing only marks the next stage due.
            context.finish()
        return Outcome.SUCCEEDED, context.finished_run
    except BaseException as exc:
        context.note_cpu()
        return _handle_error(claim, spec, exc)


def _handle_error(
    claim: Claim, spec: StageSpec, exc: BaseException
) -> tuple[str, ImportRun | None]:
    """Classify what the stage raised, once for every stage. Called while handling it.

    The run's error message is written for the uploader; the exception's own
    text, class and traceback go to the attempt, for operators.
    """
    if isinstance(exc, LeaseLost):
        logger.warning("run %s: lost the hold during %s; leaving it", claim.run.id, spec.name)
        # The attempt says why it stopped: the run ended meanwhile, or the stage was
        # taken back from this worker.
        _safely(run_record_lost_hold, claim=claim)
        return "lease_lost", None
    if isinstance(exc, (SystemExit, KeyboardInterrupt)):
        # The worker is being stopped: give the stage back so it resumes elsewhere now.
        _safely(run_release, claim=claim, reason="worker stopped during the stage")
        raise exc
    if isinstance(exc, (PermanentError, ServiceError)):
        # Bad input or a refusal (damaged file, over quota): retrying cannot help.
        return _fail(claim, exc, Outcome.PERMANENT_ERROR, exc.code, exc.message, permanent=True)
    if isinstance(exc, DataError):
        # The database refuses what the stage made of this document; it would
        # refuse it again on every try.
        message = (
            f"The {spec.name} step produced data that could not be saved, so the document "
            "cannot be processed as it is. An operator can see the details."
        )
        code = "unstorable_data"
        return _fail(claim, exc, Outcome.PERMANENT_ERROR, code, message, permanent=True)
    if isinstance(exc, broker.JobTimeout):
        message = f"The {spec.name} step took longer than its limit of {spec.timeout} seconds."
        return _fail(claim, exc, Outcome.TIMEOUT, "timeout", message, permanent=False)
    if isinstance(exc, ProviderOutage):
        # The provider is down for every run: this one waits for it, its tries whole.
        message = (
            f"The {spec.name} step waits for the embedding provider, which is not answering; "
            "it goes on by itself once the provider answers again."
        )
        return _fail(
            claim,
            exc,
            Outcome.TRANSIENT_ERROR,
            exc.code,
            message,
            permanent=False,
            provider_pause=exc.pause,
        )
    message = f"A temporary problem interrupted the {spec.name} step; it will be tried again."
    if isinstance(exc, TRANSIENT_TYPES):
        code = getattr(exc, "code", "transient_error")
        return _fail(claim, exc, Outcome.TRANSIENT_ERROR, code, message, permanent=False)
    # A bug or an input we did not foresee: retried up to the bound, then an
    # operator decides (dead letter) with the exception and traceback in hand.
    return _fail(claim, exc, Outcome.TRANSIENT_ERROR, "unexpected_error", message, permanent=False)


def _describe(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc)
    return f"{exc.__class__.__name__}: {text}" if text else exc.__class__.__name__


def _fail(
    claim: Claim,
    exc: BaseException,
    outcome: str,
    code: str,
    message: str,
    *,
    permanent: bool,
    provider_pause: float | None = None,
) -> tuple[str, ImportRun | None]:
    detail = _describe(exc)
    # The message for the uploader can hold what the failing input held (a NUL in a PDF
    # name, say): unstorable, it would fail the recording and leave the run to look like
    # a crash. The attempt and the history make the detail and traceback storable.
    message = storable(message)
    logger.log(
        logging.INFO if permanent else logging.WARNING,
        "run %s: %s attempt %s %s: %s",
        claim.run.id,
        claim.run.stage,
        claim.attempt.number,
        outcome,
        detail,
    )
    run = _safely(
        run_record_failure,
        claim=claim,
        outcome=outcome,
        code=code,
        message=message,
        failure=Failure(
            detail=detail,
            error_type=f"{type(exc).__module__}.{type(exc).__qualname__}",
            traceback=traceback.format_exc(),
        ),
        permanent=permanent,
        provider_pause=provider_pause,
    )
    return outcome, run


def _safely(fn, **kwargs):
    # Recording must not turn one failure into two; if the database is away,
    # the lease expires and the sweeper records the attempt instead.
    try:
        close_old_connections()
        return fn(**kwargs)
    except DatabaseError:
        logger.exception("could not record the outcome of run %s", kwargs["claim"].run.id)
        return None
