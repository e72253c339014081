"""Reads for operators (the admin): stuck runs, error codes, dead letter groups, a run's story.

Each is bounded: a fixed number of queries whatever the number of runs, and
Redis asked in one round trip about a bounded number of jobs.
"""

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection
from django.db.models import Count, Max, Min, Q, QuerySet
from django.utils import timezone
from redis.exceptions import RedisError

from documents.models import Chunk, UsageEntry
from operations.stats.snapshot import lease_expired_q, no_progress_q
from pipeline.dispatch import DISPATCH_FIELDS, JobState, job_state, runs_without_waiting_job
from pipeline.models import ACTIVE_STATUSES, ImportRun, RunStatus, RunTransition, StageAttempt

# A run due for less than this may simply not have been enqueued yet (the accept
# path and the stage callbacks enqueue right after their commit).
LOST_JOB_GRACE_SECONDS = 5
# How many due runs, longest due first, "stuck: no job waiting" asks Redis about.
LOST_JOB_CANDIDATES = 1000

STUCK_KINDS = {
    "any": "any of these",
    "no_progress": "no progress",
    "lease_expired": "lease expired",
    "no_job": "due, no job waiting",
}


def runs_lost_in_redis(*, now: datetime | None = None) -> list[uuid.UUID]:
    """Runs whose stage is due (no worker holds it) but whose job RQ will not run.

    Bounded: only runs due for more than LOST_JOB_GRACE_SECONDS, and of those the
    LOST_JOB_CANDIDATES due longest (one indexed query), asked about in one pipelined
    Redis round trip. In a larger backlog the newer ones are not looked at here;
    they show up as "no progress" once PAPERLANE_STUCK_AFTER_SECONDS have passed.
    """
    now = now or timezone.now()
    candidates = list(
        ImportRun.objects.filter(
            status__in=ACTIVE_STATUSES,
            lease_owner="",
            due_at__lte=now - timedelta(seconds=LOST_JOB_GRACE_SECONDS),
        )
        .order_by("due_at")
        .only(*DISPATCH_FIELDS, "status", "lease_owner")[:LOST_JOB_CANDIDATES]
    )
    return [run.id for run in runs_without_waiting_job(candidates)]


def stuck_filter(kind: str, *, now: datetime | None = None) -> Q:
    """Active runs that are stuck: no progress for PAPERLANE_STUCK_AFTER_SECONDS
    (`updated_at` moves with every change and progress report, not with lease
    renewals), a worker's lease that expired, or a due stage with no job waiting."""
    now = now or timezone.now()
    kinds = {
        "no_progress": lambda: no_progress_q(now),
        "lease_expired": lambda: lease_expired_q(now),
        "no_job": lambda: Q(id__in=runs_lost_in_redis(now=now)),
    }
    chosen = list(kinds) if kind == "any" else [kind]
    condition = Q()
    for name in chosen:
        condition |= kinds[name]()
    return Q(status__in=ACTIVE_STATUSES) & condition


def distinct_values(model, field: str, *, limit: int = 200) -> list[str]:
    """The distinct non-empty values of an indexed text column, by skipping through
    its index (one lookup per value), not by reading every row."""
    table, column = model._meta.db_table, model._meta.get_field(field).column
    quote = connection.ops.quote_name
    step = f"SELECT MIN({quote(column)}) FROM {quote(table)} WHERE {quote(column)} > "
    sql = (
        f"WITH RECURSIVE found(value) AS (SELECT ({step}%s) "
        f"UNION ALL SELECT ({step}found.value) FROM found WHERE found.value IS NOT NULL) "
        f"SELECT value FROM found WHERE value IS NOT NULL LIMIT %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, ["", limit])
        return [row[0] for row in cursor.fetchall()]


ENDED_BADLY = (RunStatus.DEAD_LETTER, RunStatus.FAILED)


def dead_letter_groups() -> list[dict]:
    """Dead-lettered and failed runs by error code and stage: how many, first and last seen."""
    return list(
        ImportRun.objects.filter(status__in=ENDED_BADLY)
        .values("error_code", "stage")
        .annotate(
            dead_letter=Count("id", filter=Q(status=RunStatus.DEAD_LETTER)),
            failed=Count("id", filter=Q(status=RunStatus.FAILED)),
            total=Count("id"),
            first_seen=Min("finished_at"),
            last_seen=Max("finished_at"),
        )
        .order_by("-total", "error_code", "stage")
    )


def dead_letter_group(*, error_code: str, stage: str, statuses=ENDED_BADLY) -> QuerySet:
    """The runs of one group, oldest first."""
    return ImportRun.objects.filter(
        status__in=statuses, error_code=error_code, stage=stage
    ).order_by("finished_at", "id")


# The run page shows at most this many attempts and transitions (the latest).
STORY_LIMIT = 200


@dataclass
class RunStory:
    """Everything the run page shows beside the run's own fields."""

    attempts: list[StageAttempt]
    transitions: list[RunTransition]
    usage: UsageEntry | None
    chunks_stored: int | None
    job: JobState | None
    job_error: str = ""


def run_story(run: ImportRun) -> RunStory:
    """A run's attempts, transitions, ledger entry, stored chunks and RQ job: a fixed
    number of queries (the run itself loaded with its document and reservation)."""
    attempts = list(
        StageAttempt.objects.filter(run=run).order_by("-started_at", "-id")[:STORY_LIMIT]
    )
    transitions = list(
        RunTransition.objects.filter(run=run).order_by("-created_at", "-id")[:STORY_LIMIT]
    )
    usage = chunks = None
    if run.document_id is not None:
        document = run.document
        usage = UsageEntry.objects.filter(
            organisation_id=run.organisation_id,
            document_id=document.id,
            document_version=document.version,
        ).first()
        chunks = Chunk.objects.filter(document_id=document.id, version=document.version).count()
    try:
        job, job_error = job_state(run), ""
    except RedisError as exc:
        job, job_error = None, f"Redis did not answer: {exc}"
    return RunStory(
        attempts=attempts[::-1],
        transitions=transitions[::-1],
        usage=usage,
        chunks_stored=chunks,
        job=job,
        job_error=job_error,
    )
