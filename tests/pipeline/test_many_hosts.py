"""Two hosts share the load; losing one loses no run.

Two `run_workers` supervisors with different `--host` names (two hosts, on one
machine) work against one PostgreSQL and one Redis database. Once both have
taken stages, every process of one is SIGKILLed at once, as when a machine
dies. The other finishes everything: the lost host's stages are taken back
when their leases expire and resume on the survivor within the recovery
promise, with no duplicate chunks and no double charges.
"""

import os
import signal
from contextlib import ExitStack
from datetime import timedelta

import pytest
from django.utils import timezone

from pipeline.models import ImportRun, StageAttempt
from tests.support.files import make_pdf
from tests.support.integrity import integrity_problems
from tests.support.pipeline import TEST_PIPELINE_ENV, poll, runs_not_ended, wait_for
from tests.support.processes import process_env, run_workers_process
from tests.support.uploads import accepted_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

DOCUMENTS = 30
LOST, SURVIVOR = "host-lost", "host-survivor"
ENV = {
    **TEST_PIPELINE_ENV,
    "PAPERLANE_LEASE_SECONDS": "6",
    "PAPERLANE_SWEEP_INTERVAL_SECONDS": "1",
    # A job the lost host took from Redis but had not claimed yet is delivered again after this.
    "PAPERLANE_REDELIVER_AFTER_SECONDS": "6",
    # Embedding takes a while, like a remote model, so the lost host dies mid-stage.
    "PAPERLANE_EMBEDDER": "tests.support.embedders.SlowEmbedder",
    "EMBED_DELAY": "0.5",
}
SECONDS = {name: float(value) for name, value in ENV.items() if name.endswith("_SECONDS")}
# A dead host's lease expires and the next sweep takes its stage back; a job it took
# off a queue but never started is found once queued for the redelivery delay and
# delivered again by the pass after.
SWEEP = SECONDS["PAPERLANE_SWEEP_INTERVAL_SECONDS"]
TAKEN_BACK_WITHIN = (
    max(
        SECONDS["PAPERLANE_LEASE_SECONDS"],
        SECONDS["PAPERLANE_REDELIVER_AFTER_SECONDS"] + SWEEP,
    )
    + SWEEP
)
# A sweep pass, the hand-off, and the rest of an orphaned run's stages on a busy machine.
MARGIN = 5.0
RECOVERY_PROMISE = TAKEN_BACK_WITHIN + MARGIN
# The loss comes once the embedding left fits in the time the lease takes to expire,
# so what the survivor has to do is bounded by the promise, not by the backlog.
EMBEDS_LEFT_AT_LOSS = int(TAKEN_BACK_WITHIN / float(ENV["EMBED_DELAY"])) - 2


def attempts_by(host: str):
    return StageAttempt.objects.filter(worker__startswith=f"{host}.")


def lost_host_holds_a_stage_late_in_the_batch(run_ids) -> bool:
    runs = ImportRun.objects.filter(id__in=run_ids)
    before_settle = runs.exclude(stage="settle").exclude(status="succeeded").count()
    held = runs.filter(lease_owner__contains=f"@{LOST}.").exists()
    return held and before_settle <= EMBEDS_LEFT_AT_LOSS


def gone(process_group: int) -> bool:
    try:
        os.killpg(process_group, 0)
    except ProcessLookupError:
        return True
    return False


def test_two_hosts_share_the_load_and_a_lost_host_loses_no_run(api, org):
    environment = process_env(**ENV)
    with ExitStack() as stack:
        lost, survivor = (
            stack.enter_context(
                run_workers_process(
                    env=environment,
                    args=("--host", host, "--concurrency", "extract=1,ocr=1,embed=1"),
                )
            )
            for host in (LOST, SURVIVOR)
        )
        runs = [accepted_run(api, make_pdf(1, label=f"Document {n}")) for n in range(DOCUMENTS)]
        run_ids = [r.id for r in runs]
        wait_for(
            lambda: attempts_by(LOST).exists() and attempts_by(SURVIVOR).exists(),
            timeout=60,
            what="both hosts to take stages",
        )
        wait_for(
            lambda: lost_host_holds_a_stage_late_in_the_batch(run_ids),
            timeout=90,
            interval=0.05,
            what=f"{LOST} to hold a stage with at most {EMBEDS_LEFT_AT_LOSS} runs before settle",
        )
        # A host lost: every process of its supervisor at once.
        os.killpg(lost.pid, signal.SIGKILL)
        killed_at = timezone.now()
        lost.wait(timeout=10)
        wait_for(lambda: gone(lost.pid), timeout=10, what=f"every process of {LOST} to end")
        orphaned = {
            run_id: (stage, owner.partition("@")[0])
            for run_id, stage, owner in ImportRun.objects.filter(
                lease_owner__contains=f"@{LOST}."
            ).values_list("id", "stage", "lease_owner")
        }
        assert orphaned, f"{LOST} held no stage when it was lost"

        left = poll(lambda: not runs_not_ended(run_ids), timeout=RECOVERY_PROMISE + 60)
        assert left, f"runs not ended: {runs_not_ended(run_ids)}"
        finished = {r.id: r for r in ImportRun.objects.filter(id__in=run_ids)}
        assert survivor.poll() is None, "the survivor's supervisor exited"

    assert integrity_problems(list(finished.values()), pages=1) == {}
    last_end = max(r.finished_at for r in finished.values())
    assert (last_end - killed_at).total_seconds() <= RECOVERY_PROMISE
    # Both hosts did work before the loss, only the survivor after it.
    assert attempts_by(LOST).filter(outcome="succeeded").exists()
    late = StageAttempt.objects.filter(started_at__gt=killed_at + timedelta(seconds=0.5))
    assert late.exists() and not late.exclude(worker__startswith=f"{SURVIVOR}.").exists()
    for run_id, (stage, job_id) in orphaned.items():
        attempts = list(StageAttempt.objects.filter(run_id=run_id, stage=stage))
        (abandoned,) = [a for a in attempts if a.job_id == job_id]
        assert abandoned.worker.startswith(f"{LOST}.")
        assert (abandoned.outcome, abandoned.error_code) == ("abandoned", "worker_lost")
        taken_back = (abandoned.finished_at - killed_at).total_seconds()
        assert taken_back <= TAKEN_BACK_WITHIN + 1, (run_id, stage, taken_back)
        (succeeded,) = [a for a in attempts if a.outcome == "succeeded"]
        assert succeeded.worker.startswith(f"{SURVIVOR}.")
