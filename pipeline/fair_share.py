"""Fair share of a weighed stage's workers (extract, ocr): one organisation's heavy
documents never hold all of them.

What a document may cost to extract grows with the pages held for it
(pipeline/stages/extract.py gives its child EXTRACT_CPU_BASE_SECONDS and
EXTRACT_CPU_SECONDS_PER_PAGE a page). A document held for HEAVY_PAGES or more is heavy:
an organisation runs at most `heavy_cap()` of them at once on a stage (the stage's
workers less one, at least one), counted as calls in flight by the one rate limiter
(core/rate_limit.py). A worker that takes a heavy job over its organisation's cap puts
it back at the head of its lane and leaves that lane alone for REST_SECONDS, taking the
other lanes' work meanwhile. So another organisation's document waits at the stage for
at most what a light document may take (EXTRACT_CPU_BASE_SECONDS + (HEAVY_PAGES - 1)
pages' worth), never for a heavy one; tests/pipeline/test_fair_share_workers.py shows it
with real workers. A heavy job's place is given back when it ends, and when its worker
died and its stage is taken back (`heavy_entry_release`); only if that too is lost does
it leave with its window, the stage's timeout.

Weighing costs the worker one small query per job of a weighed stage. Redis or the
database away: the job runs uncounted (this is a matter of fairness, never of
correctness).
"""

import logging

from django.db import DatabaseError, connection

from core.rate_limit import RateLimitUnavailable, Rule, rate_release, rate_take
from pipeline import broker
from pipeline.models import ImportRun
from pipeline.stage_list import stage_spec

logger = logging.getLogger(__name__)

# A document held for this many pages or more is heavy (its extraction may take 5 s).
HEAVY_PAGES = 3
# How long a worker leaves a lane alone after putting a heavy job back on it.
REST_SECONDS = 1.0
RUNNING_KEY = "paperlane:heavy:{stage}:{organisation}"


def heavy_cap(stage: str) -> int:
    """Heavy jobs of one organisation a stage runs at once: its workers less one (one is
    always free for the others), at least one."""
    spec = stage_spec(stage)
    return max(1, spec.concurrency + spec.bulk_concurrency - 1)


def _rule(stage: str, organisation_id) -> Rule:
    return Rule(
        key=RUNNING_KEY.format(stage=stage, organisation=organisation_id),
        limit=heavy_cap(stage),
        # The longest a job may run: an entry whose worker died leaves with it.
        window_seconds=stage_spec(stage).timeout,
    )


def heavy_entry_release(*, stage: str, organisation_id, entry: str) -> None:
    """The heavy job `entry` of the organisation no longer runs (its worker died and its
    stage was taken back): its place is free now, not at the end of its window, which
    kept every heavy job of the organisation waiting behind a dead worker's for up to the
    stage's timeout. Nothing for a light job or a stage not weighed; best effort."""
    if stage_spec(stage).weighed:
        rate_release(rules=[_rule(stage, organisation_id)], entry=entry)


class Share:
    """One worker's heavy job in flight, if it runs one."""

    def __init__(self) -> None:
        self._held: tuple[Rule, str] | None = None

    def admits(self, job: broker.RQJob) -> bool:
        """Whether the worker may run `job` now; a heavy job within its organisation's
        cap is counted until `release`."""
        run_id, stage = broker.job_run_and_stage(job)
        if stage is None or not stage_spec(stage).weighed:
            return True
        try:
            weight = (
                ImportRun.objects.filter(id=run_id)
                .values_list("organisation_id", "reservation__pages")
                .first()
            )
        except DatabaseError:
            # The job's own claim meets the database next, and says what is wrong.
            logger.warning("could not weigh job %s; running it uncounted", job.id)
            connection.close()
            return True
        if weight is None or (weight[1] or 0) < HEAVY_PAGES:
            return True
        rule = _rule(stage, weight[0])
        try:
            refused = rate_take(rules=[rule], entry=job.id)
        except RateLimitUnavailable:
            logger.warning("could not count heavy job %s; running it uncounted", job.id)
            return True
        if refused:
            return False
        self._held = (rule, job.id)
        return True

    def release(self) -> None:
        """The heavy job this worker ran has ended: its organisation's place is free."""
        if self._held is not None:
            rule, entry = self._held
            self._held = None
            rate_release(rules=[rule], entry=entry)
