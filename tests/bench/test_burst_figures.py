"""The burst's checks count what they claim, on runs driven through the real stages.

The database's own constraints forbid most of what these counters look for, so
the tests that need a duplicate drop the constraint inside a transaction they
roll back.
"""

from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.models import F

from bench._burst_figures import (
    accepted_in_gunicorn,
    charges,
    double_charges,
    duplicate_chunks,
    ended_by_seconds,
    quota_overshoot,
    stage_work,
)
from documents.models import Chunk, Document, Organisation, UsageEntry
from pipeline.models import ImportRun, StageAttempt
from pipeline.stage_list import STAGES
from tests.support.files import make_pdf
from tests.support.runs import drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)


class _Undo(Exception):
    pass


@contextmanager
def without_constraint(table: str, name: str):
    """Drop a constraint for the block; everything the block did is rolled back."""
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(f'ALTER TABLE "{table}" DROP CONSTRAINT "{name}"')
            yield
            raise _Undo
    except _Undo:
        pass


@pytest.fixture
def finished_run(api):
    run = drive(accepted_run(api, make_pdf(12, words_per_page=200)).id)
    assert run.status == "succeeded"
    assert run.document.chunk_count > 1
    return run


def test_a_clean_run_has_no_duplicates_nor_double_charges(finished_run, org):
    assert duplicate_chunks([finished_run.id]) == 0
    assert double_charges([finished_run.id]) == 0
    assert quota_overshoot([org.id]) == 0
    assert charges([finished_run.id]) == {"pages_charged": 12, "charge_mismatches": 0}


def test_it_counts_chunks_beyond_the_count_the_document_recorded(finished_run):
    Document.objects.filter(id=finished_run.document_id).update(chunk_count=F("chunk_count") - 1)

    assert duplicate_chunks([finished_run.id]) == 1


def test_it_counts_chunks_sharing_a_position(finished_run):
    chunk = Chunk.objects.filter(document_id=finished_run.document_id).first()
    with without_constraint(Chunk._meta.db_table, "chunk_unique_position"):
        Chunk.objects.create(
            id=Chunk.stable_id(document_id=chunk.document_id, version=99, index=0),
            document_id=chunk.document_id,
            version=chunk.version,
            index=chunk.index,
            text=chunk.text,
            embedding=chunk.embedding,
            embedding_model=chunk.embedding_model,
        )
        # One row too many at a position, and so one beyond the recorded count too.
        assert duplicate_chunks([finished_run.id]) == 2


def test_it_counts_a_second_charge_of_one_document_version(finished_run):
    entry = UsageEntry.objects.get(document_id=finished_run.document_id)
    with without_constraint(UsageEntry._meta.db_table, "usage_once_per_document_version"):
        UsageEntry.objects.create(
            organisation_id=entry.organisation_id,
            document_id=entry.document_id,
            document_version=entry.document_version,
            pages=entry.pages,
        )
        assert double_charges([finished_run.id]) == 1


def test_it_counts_a_charge_for_other_than_the_documents_pages(finished_run):
    UsageEntry.objects.filter(document_id=finished_run.document_id).update(pages=11)

    assert charges([finished_run.id]) == {"pages_charged": 11, "charge_mismatches": 1}


def test_it_measures_quota_overshoot_per_organisation(org, other_org):
    with without_constraint(Organisation._meta.db_table, "organisation_quota_within_limit"):
        Organisation.objects.filter(id=org.id).update(pages_used=990, pages_reserved=30)
        Organisation.objects.filter(id=other_org.id).update(pages_used=500)
        assert quota_overshoot([org.id, other_org.id]) == 20


def _attempts_take(run, seconds: dict[str, float], cpu_ms: dict[str, int]) -> None:
    for attempt in StageAttempt.objects.filter(run_id=run.id):
        attempt.finished_at = attempt.started_at + timedelta(seconds=seconds[attempt.stage])
        attempt.cpu_ms = cpu_ms[attempt.stage]
        attempt.save(update_fields=["finished_at", "cpu_ms"])


def test_the_ideal_drain_is_the_slowest_stages_successful_work_per_worker(finished_run):
    seconds = {"create": 1, "store": 1, "extract": 4, "embed": 6, "settle": 1}
    _attempts_take(finished_run, seconds, dict.fromkeys(seconds, 100))
    # A failed try of embed took long: lost work, not part of the ideal.
    StageAttempt.objects.create(
        run_id=finished_run.id,
        stage="embed",
        number=9,
        started_at=finished_run.created_at,
        finished_at=finished_run.created_at + timedelta(seconds=100),
        outcome=StageAttempt.Outcome.TRANSIENT_ERROR,
        cpu_ms=90_000,
    )
    workers = {spec.name: 1 for spec in STAGES} | {"extract": 2, "embed": 3}

    work = stage_work([finished_run.id], workers, 2)

    assert work["stages"]["embed"] == {
        "work_s": 6,
        "cpu_s": 0.1,
        "lost_s": 100,
        "workers": 3,
        "bound_s": 2,
    }
    assert work["slowest_stage"] == "extract"
    assert work["drain_ideal_seconds"] == work["drain_ideal_wall_seconds"] == 2
    # An upload's three stages (extract, embed, settle) x 0.1 s / 2 cores.
    assert work["drain_ideal_cpu_seconds"] == pytest.approx(0.15)
    assert work["retries"] == 1


def test_the_ideal_drain_is_the_cpu_of_every_stage_over_the_cores_when_that_is_longer(
    finished_run,
):
    # Busy stages sharing two cores: each alone fits its workers' time, all of them
    # together need more CPU than the cores have in that time.
    seconds = {"create": 1, "store": 1, "extract": 4, "embed": 4, "settle": 1}
    cpu_ms = {"create": 500, "store": 500, "extract": 4000, "embed": 4000, "settle": 1000}
    _attempts_take(finished_run, seconds, cpu_ms)
    workers = {spec.name: 1 for spec in STAGES} | {"extract": 2, "embed": 2}

    work = stage_work([finished_run.id], workers, 2)

    assert work["drain_ideal_wall_seconds"] == 2
    assert work["drain_ideal_cpu_seconds"] == work["drain_ideal_seconds"] == 4.5  # 9 s / 2
    assert work["slowest_stage"] == "all stages' CPU / 2 cores"


def test_it_times_when_a_share_of_the_runs_had_ended(api):
    runs = [accepted_run(api, make_pdf(1, label=f"Doc {n}")) for n in range(4)]
    start = runs[0].created_at
    for run, seconds in zip(runs, (30, 10, 100, 20), strict=True):
        ImportRun.objects.filter(id=run.id).update(finished_at=start + timedelta(seconds=seconds))
    ids = [run.id for run in runs]

    assert ended_by_seconds(ids, start, 0.75) == 30
    assert ended_by_seconds(ids, start, 0.99) == 100
    ImportRun.objects.filter(id=runs[2].id).update(finished_at=None)
    assert ended_by_seconds(ids, start, 0.99) is None


def test_gunicorn_times_and_uploads_per_process_come_from_accepted_posts_only():
    log = "\n".join(
        [
            "POST 202 41000 <101>",
            "POST 202 9500 <102>",
            "POST 429 800 <103>",  # refused: no time of an acceptance
            "GET 200 1200 <103>",
            "POST 202 20000 <101>",
        ]
    )

    times, per_process = accepted_in_gunicorn(log)

    assert times == [41.0, 9.5, 20.0]
    assert per_process == [2, 1]
