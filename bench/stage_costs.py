"""What each stage costs in its worker, in-process: SQL statements, transactions, Redis
calls and CPU, for one-page PDFs accepted as API uploads.

    .venv/bin/python bench/stage_costs.py [-n 20] [--profile STAGE] [--top 25]

Each document is accepted through the accept service, then every stage it is due
for is run by calling the engine's job function (`execute_stage`) and then its job's
`on_success` callback with what it returned, in this process, as a worker would
(the callback enqueues the next stage into the bench Redis db, emptied first).
Counted per stage and document, median over the documents:

statements  SQL statements sent (django's execute_wrapper)
xacts       transactions committed by the engine (each costs BEGIN and COMMIT too)
round trips statements + 2 x xacts: what the stage waits on PostgreSQL for
redis       Redis commands the job and its callback send (an enqueue is one pipeline of
            several)
cpu ms      CPU of the calling thread (time.thread_time) for both, the lease keeper excluded

--profile STAGE prints cProfile's heaviest functions (cumulative) for that stage;
--sql prints the statements of the last document, stage by stage.
bench/pipeline.py prints this table after its burst.
"""

import argparse
import cProfile
import io
import pstats
import time
from collections import defaultdict
from contextlib import contextmanager

from _common import SCRATCH, bench_env, fresh_database, median, print_table
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from redis.client import Pipeline, Redis

from core.redis import redis_connection
from documents.models import Organisation
from documents.services.organisations import organisation_create
from pipeline.dispatch import on_stage_job_success
from pipeline.engine import execute_stage
from pipeline.models import ImportRun, RunSource
from pipeline.services.accept import document_accept
from tests.support.files import make_pdf


class Counters:
    def __init__(self) -> None:
        self.statements = self.commits = self.redis = 0
        self.sql_seen: list[str] = []

    def sql(self, execute, sql, params, many, context):
        self.statements += 1
        self.sql_seen.append(sql)
        return execute(sql, params, many, context)


@contextmanager
def counting(counters: Counters):
    """Count SQL statements, commits and Redis commands sent inside the block."""
    commit = connection._commit
    command, pipeline_execute = Redis.execute_command, Pipeline.execute

    def counted_commit():
        counters.commits += 1
        return commit()

    def counted_command(self, *args, **kwargs):
        counters.redis += 1
        return command(self, *args, **kwargs)

    def counted_pipeline(self, *args, **kwargs):
        counters.redis += len(self.command_stack)
        return pipeline_execute(self, *args, **kwargs)

    connection._commit = counted_commit
    Redis.execute_command, Pipeline.execute = counted_command, counted_pipeline
    try:
        with connection.execute_wrapper(counters.sql):
            yield
    finally:
        del connection._commit
        Redis.execute_command, Pipeline.execute = command, pipeline_execute


def accept_one(organisation: Organisation, index: int) -> str:
    upload = SimpleUploadedFile(f"doc{index}.pdf", make_pdf(1, label=f"Doc {index} page"))
    acceptance = document_accept(organisation=organisation, upload=upload, source=RunSource.API)
    return str(acceptance.run.id)


def measure(
    n: int, profile_stage: str | None = None, show_sql: bool = False
) -> tuple[dict, pstats.Stats | None]:
    """Per stage: lists of statements, xacts, redis commands and CPU ms, one per document."""
    organisation = organisation_create(slug="costs", name="Costs", page_limit=10_000_000)
    figures: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    # CPU of this thread, not wall time: waiting on PostgreSQL or a child is not cost here.
    profiler = cProfile.Profile(time.thread_time) if profile_stage else None
    run_ids = [accept_one(organisation, i) for i in range(n + 1)]
    for number, run_id in enumerate(run_ids):
        while True:
            run = ImportRun.objects.get(id=run_id)
            if run.is_terminal:
                if run.status != "succeeded":
                    raise RuntimeError(f"run {run_id} ended {run.status}: {run.error_message}")
                break
            stage, counters = run.stage, Counters()
            profiling = profiler is not None and stage == profile_stage and number > 0
            with counting(counters):
                started = time.thread_time()
                if profiling:
                    profiler.enable()
                result = execute_stage(run_id, stage)
                on_stage_job_success(None, None, result)
                if profiling:
                    profiler.disable()
                cpu_ms = (time.thread_time() - started) * 1000
            if result["outcome"] != "succeeded":
                raise RuntimeError(f"run {run_id} {stage}: {result}")
            if number == 0:
                continue  # the first document warms imports and caches
            if show_sql and number == n:
                print(f"\n{stage}: {counters.commits} commits; statements:")
                for sql in counters.sql_seen:
                    print(f"  {sql[:160]}")
            row = figures[stage]
            row["statements"].append(counters.statements)
            row["xacts"].append(counters.commits)
            row["redis"].append(counters.redis)
            row["cpu_ms"].append(cpu_ms)
    stats = pstats.Stats(profiler) if profiler is not None else None
    return figures, stats


def print_costs(figures: dict) -> dict[str, float]:
    """The table, and the per-document totals of its medians."""
    keys = ("statements", "xacts", "redis", "cpu_ms")
    totals = dict.fromkeys(keys, 0.0)
    rows = []
    for stage, row in figures.items():
        medians = {key: median(row[key]) for key in keys}
        for key in keys:
            totals[key] += medians[key]
        rows.append(_row(stage, medians))
    rows.append(_row("per document", totals))
    headers = ["stage", "statements", "xacts", "round trips", "redis", "cpu ms"]
    print_table(headers, rows)
    return totals


def _row(name: str, m: dict[str, float]) -> list[str]:
    trips = m["statements"] + 2 * m["xacts"]
    return [
        name,
        f"{m['statements']:g}",
        f"{m['xacts']:g}",
        f"{trips:g}",
        f"{m['redis']:g}",
        f"{m['cpu_ms']:.1f}",
    ]


def stage_costs(
    n: int, profile_stage: str | None = None, top: int = 25, show_sql: bool = False
) -> dict[str, float]:
    """Fresh bench database, N documents through every stage in-process; prints the table."""
    fresh_database(bench_env(str(SCRATCH / "media")))
    redis_connection().flushdb()
    figures, stats = measure(n, profile_stage, show_sql)
    print(f"\nStage costs in-process: {n} one-page PDFs (API uploads), medians per document\n")
    totals = print_costs(figures)
    if stats is not None:
        print(f"\ncProfile of {profile_stage}, {n} documents, cumulative:\n")
        out = io.StringIO()
        stats.stream = out
        stats.sort_stats("cumulative").print_stats(top)
        print(out.getvalue())
    redis_connection().flushdb()
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20, help="documents measured")
    parser.add_argument("--profile", metavar="STAGE", help="cProfile this stage")
    parser.add_argument("--top", type=int, default=25, help="functions in the profile")
    parser.add_argument("--sql", action="store_true", help="print the last document's SQL")
    args = parser.parse_args()
    if args.n <= 0:
        parser.error("-n must be positive")
    stage_costs(args.n, args.profile, args.top, args.sql)


if __name__ == "__main__":
    main()
