"""What the burst left in the database (chunks, charges, quotas, the work done) and in
gunicorn's access log, checked.

Plain functions over the project's models, so the tests can run them against
rows they made; nothing here starts processes or reads the bench settings.
"""

import math
from collections import Counter
from collections.abc import Iterable
from datetime import datetime

from django.db.models import Count, F, Max, Min, Q, Sum

from documents.models import Chunk, Document, Organisation, QuotaReservation, UsageEntry
from pipeline.models import TERMINAL_STATUSES, ImportRun, RunStatus, StageAttempt
from pipeline.stage_list import STAGES


def duplicate_chunks(run_ids: Iterable) -> int:
    """Chunk rows beyond one per (document, version, index), plus, for every document
    whose run succeeded, rows of its current version beyond the chunk count it recorded."""
    runs = ImportRun.objects.filter(id__in=list(run_ids))
    document_ids = list(runs.values_list("document_id", flat=True))
    shared = _beyond_one(
        Chunk.objects.filter(document_id__in=document_ids), "document_id", "version", "index"
    )
    succeeded = Document.objects.filter(
        id__in=runs.filter(status=RunStatus.SUCCEEDED).values("document_id")
    ).annotate(rows=Count("chunks", filter=Q(chunks__version=F("version"))))
    beyond = sum(max(0, d.rows - d.chunk_count) for d in succeeded.only("id", "chunk_count"))
    return shared + beyond


def double_charges(run_ids: Iterable) -> int:
    """Usage entries beyond one per organisation, document and document version."""
    document_ids = ImportRun.objects.filter(id__in=list(run_ids)).values("document_id")
    return _beyond_one(
        UsageEntry.objects.filter(document_id__in=document_ids),
        "organisation_id",
        "document_id",
        "document_version",
    )


def _beyond_one(rows, *key: str) -> int:
    """How many of `rows` share their `key` with an earlier one (0 when every key is unique)."""
    return (
        rows.values(*key)
        .order_by()
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .aggregate(extra=Sum(F("n") - 1))["extra"]
        or 0
    )


def charges(run_ids: Iterable) -> dict:
    """Pages charged, and charges that do not match the document: a succeeded run whose
    document has no entry or one for other than its page count, or an entry for a
    document whose run did not succeed."""
    runs = ImportRun.objects.filter(id__in=list(run_ids)).select_related("document")
    entries: dict = {}
    for document_id, pages in UsageEntry.objects.filter(
        document_id__in=runs.values("document_id")
    ).values_list("document_id", "pages"):
        entries.setdefault(document_id, []).append(pages)
    mismatched = 0
    for run in runs:
        charged = entries.get(run.document_id, [])
        if run.status == RunStatus.SUCCEEDED:
            mismatched += charged[:1] != [run.document.page_count]
        else:
            mismatched += bool(charged)
    return {
        "pages_charged": sum(sum(pages) for pages in entries.values()),
        "charge_mismatches": mismatched,
    }


def quota_overshoot(organisation_ids: Iterable[int]) -> int:
    """Sum over the organisations of max(0, pages used + reserved - limit)."""
    rows = Organisation.objects.filter(id__in=list(organisation_ids)).values_list(
        "page_limit", "pages_used", "pages_reserved"
    )
    return sum(max(0, used + reserved - limit) for limit, used, reserved in rows)


def quota_books(organisation_ids: Iterable[int]) -> dict:
    """Whether each organisation's running totals agree with its ledger and holds:
    drift = |pages_used - sum of usage| + |pages_reserved - sum of held reservations|."""
    organisations = Organisation.objects.filter(id__in=list(organisation_ids))
    used = dict(
        UsageEntry.objects.filter(organisation__in=organisations)
        .values("organisation_id")
        .order_by()
        .annotate(p=Sum("pages"))
        .values_list("organisation_id", "p")
    )
    held = dict(
        QuotaReservation.objects.filter(
            organisation__in=organisations, status=QuotaReservation.Status.HELD
        )
        .values("organisation_id")
        .order_by()
        .annotate(p=Sum("pages"))
        .values_list("organisation_id", "p")
    )
    books = {}
    for org in organisations:
        books[org.slug] = {
            "page_limit": org.page_limit,
            "pages_used": org.pages_used,
            "pages_reserved": org.pages_reserved,
            "drift": abs(org.pages_used - used.get(org.id, 0))
            + abs(org.pages_reserved - held.get(org.id, 0)),
        }
    return books


def run_outcomes(run_ids: Iterable) -> dict:
    """Runs by status, failed runs by error code, how many have ended, the last end."""
    runs = ImportRun.objects.filter(id__in=list(run_ids))
    by_status = dict(runs.values_list("status").order_by().annotate(n=Count("id")))
    errors = dict(
        runs.exclude(status=RunStatus.SUCCEEDED)
        .exclude(error_code="")
        .values_list("error_code")
        .order_by()
        .annotate(n=Count("id"))
    )
    return {
        "by_status": by_status,
        "errors": errors,
        "terminal": sum(n for status, n in by_status.items() if status in TERMINAL_STATUSES),
        "last_finished": runs.aggregate(m=Max("finished_at"))["m"],
    }


def stage_worker_counts() -> dict[str, int]:
    """Workers per stage as run_workers starts them with these settings; with priority
    lanes a stage also has bulk-first workers, and they share its work too."""
    return {spec.name: spec.concurrency + getattr(spec, "bulk_concurrency", 0) for spec in STAGES}


def stage_work(run_ids: Iterable, workers: dict[str, int], cores: int) -> dict:
    """Per stage: seconds of successful attempts (the work), of the others (lost: an error,
    or a worker killed, counted until the sweeper found its lease expired), the workers
    that share it, work / workers, and the CPU seconds of the successful attempts.

    Two bounds, each a time the pipeline cannot beat: the slowest stage's work / workers
    (drain_ideal_wall_seconds), and every stage's CPU / the cores
    (drain_ideal_cpu_seconds). drain_ideal_seconds is the larger. On a machine with fewer
    cores than busy workers the first depends on how the stages happened to share the
    CPU (an attempt's wall time stretches while others run): a stage that runs alone for
    a while (its neighbour paused) lowers it though no work was saved."""
    attempts = StageAttempt.objects.filter(run_id__in=list(run_ids), finished_at__isnull=False)
    work: Counter[str] = Counter()
    cpu: Counter[str] = Counter()
    lost: Counter[str] = Counter()  # attempts that did not succeed: killed, failed, skipped
    for stage, outcome, started, finished, cpu_ms in attempts.values_list(
        "stage", "outcome", "started_at", "finished_at", "cpu_ms"
    ):
        spent = (finished - started).total_seconds()
        if outcome == StageAttempt.Outcome.SUCCEEDED:
            work[stage] += spent
            cpu[stage] += (cpu_ms or 0) / 1000
        else:
            lost[stage] += spent
    stages = {}
    for spec in STAGES:
        count = workers[spec.name]
        stages[spec.name] = {
            "work_s": work[spec.name],
            "cpu_s": cpu[spec.name],
            "lost_s": lost[spec.name],
            "workers": count,
            "bound_s": work[spec.name] / count,
        }
    slowest = max(stages, key=lambda name: stages[name]["bound_s"])
    wall_bound = stages[slowest]["bound_s"]
    cpu_bound = sum(cpu.values()) / cores
    outcomes = Counter(attempts.values_list("outcome", flat=True))
    # A retry is any attempt of a stage after the first of the run (and generation).
    firsts = attempts.values("run_id", "generation", "stage").distinct().count()
    return {
        "stages": stages,
        "slowest_stage": slowest if wall_bound >= cpu_bound else f"all stages' CPU / {cores} cores",
        "drain_ideal_seconds": max(wall_bound, cpu_bound),
        "drain_ideal_wall_seconds": wall_bound,
        "drain_ideal_cpu_seconds": cpu_bound,
        "attempt_outcomes": dict(outcomes),
        "retries": sum(outcomes.values()) - firsts,
        "first_attempt": attempts.aggregate(m=Min("started_at"))["m"],
    }


def ended_by_seconds(run_ids: Iterable, start: datetime, share: float) -> float | None:
    """Seconds from `start` until `share` of the runs had ended (by their finished_at);
    None while fewer have. drain_p99 shows how much of the drain is its last runs' tail."""
    ids = list(run_ids)
    ends = sorted(
        ImportRun.objects.filter(id__in=ids, finished_at__isnull=False).values_list(
            "finished_at", flat=True
        )
    )
    needed = math.ceil(share * len(ids))
    if not ids or len(ends) < needed:
        return None
    return (ends[max(needed, 1) - 1] - start).total_seconds()


def span_seconds(start: datetime, end: datetime | None) -> float | None:
    return (end - start).total_seconds() if end else None


# gunicorn's access log line, as bench/burst.py asks for it: method, status, the
# microseconds gunicorn spent on the request, the pid of the process that served it.
ACCESS_LOG_FORMAT = "%(m)s %(s)s %(D)s %(p)s"


def accepted_in_gunicorn(access_log: str) -> tuple[list[float], list[int]]:
    """From an access log in ACCESS_LOG_FORMAT: gunicorn's milliseconds for each POST
    answered 202, and how many of them each web process served, most first."""
    times, processes = [], Counter()
    for line in access_log.splitlines():
        method, status, micros, pid = line.split()
        if method == "POST" and status == "202":
            times.append(int(micros) / 1000)
            processes[pid.strip("<>")] += 1
    return times, sorted(processes.values(), reverse=True)
