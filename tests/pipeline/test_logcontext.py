"""Log lines written during a stage name its run, stage and attempt, whoever writes them."""

import logging
import subprocess
import sys

import pytest

from pipeline.dispatch import stage_enqueue
from pipeline.engine import execute_stage
from pipeline.logcontext import WORKER_FORMAT, RunContextFilter
from pipeline.models import ImportRun
from retrieval.embedding import HashingEmbedder
from tests.support.files import make_pdf
from tests.support.lanes import waiting_count
from tests.support.processes import ROOT, process_env
from tests.support.runs import drive
from tests.support.uploads import accepted_run

pytestmark = pytest.mark.django_db(transaction=True)

chatty = logging.getLogger("tests.chatty_embedder")


class ChattyEmbedder(HashingEmbedder):
    """Logs each batch, as a provider's client library would, then fails the first time."""

    calls = 0

    def embed(self, texts, *, max_seconds=None):
        chatty.info("embedding %s texts", len(texts))
        ChattyEmbedder.calls += 1
        if ChattyEmbedder.calls == 1:
            raise ConnectionError("provider went away")
        return super().embed(texts)


@pytest.fixture
def captured(caplog):
    caplog.handler.addFilter(RunContextFilter())
    caplog.set_level(logging.INFO)
    return caplog


def test_lines_written_during_a_stage_carry_its_run_stage_and_attempt(api, settings, captured):
    settings.PAPERLANE_EMBEDDER = "tests.pipeline.test_logcontext.ChattyEmbedder"
    settings.PAPERLANE_RETRY_BASE_SECONDS = 0.01
    ChattyEmbedder.calls = 0
    run = accepted_run(api, make_pdf(1))

    assert drive(run.id).status == "succeeded"
    execute_stage(str(run.id), "embed")  # a late duplicate delivery: dropped, and said so
    logging.getLogger("tests").info("after the stages")
    records = captured.records

    by_provider = [r for r in records if r.name == "tests.chatty_embedder"]
    assert [(r.run_id, r.stage, r.attempt) for r in by_provider] == [
        (str(run.id), "embed", "1"),
        (str(run.id), "embed", "2"),
    ]
    [failure] = [r for r in records if "transient_error" in r.getMessage()]
    line = logging.Formatter(WORKER_FORMAT).format(failure)
    assert f"pipeline.engine [run={run.id} stage=embed attempt=1]: run {run.id}" in line
    [dropped] = [r for r in records if "dropping" in r.getMessage()]
    assert dropped.run_context == f" [run={run.id} stage=embed]"  # not claimed: no attempt
    assert records[-1].run_context == "" and records[-1].run_id == "-"


@pytest.mark.slow
def test_a_stage_worker_prints_the_run_stage_and_attempt(api):
    run = accepted_run(api, make_pdf(1))
    result = execute_stage(str(run.id), "extract")
    assert result["outcome"] == "succeeded"
    # What extract's job callback does once the job has returned: embed is queued for
    # the worker below.
    stage_enqueue(**result["next"])
    assert waiting_count("embed") == 1
    env = process_env(
        PAPERLANE_EMBEDDER="tests.support.embedders.AlwaysBusyEmbedder",
        PAPERLANE_RETRY_MAX_ATTEMPTS="1",
        LOG_LEVEL="INFO",
    )

    worker = subprocess.run(
        [sys.executable, "manage.py", "stage_worker", "embed", "--burst"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    output = worker.stdout + worker.stderr
    assert worker.returncode == 0, output
    lines = [line for line in output.splitlines() if "transient_error" in line]
    assert lines and f"[run={run.id} stage=embed attempt=1]" in lines[0], output
    assert ImportRun.objects.get(id=run.id).status == "dead_letter"


def test_the_lease_keepers_lines_name_the_stage_it_keeps(settings, monkeypatch, captured):
    from django.db import OperationalError

    from pipeline import lease
    from pipeline.logcontext import run_log_context
    from tests.support.pipeline import wait_for

    def database_away(**kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(lease, "run_renew_lease", database_away)
    settings.PAPERLANE_LEASE_SECONDS = 0.6  # a renewal every 0.2 s
    keeper = lease.LeaseKeeper()  # not the workers' own: its thread ticks at this pace
    with run_log_context(run_id="r-1", stage="extract", attempt=3):
        keeper.hold(run_id="r-1", owner="job@worker", timeout=60)
    try:
        warned = wait_for(
            lambda: [r for r in captured.records if "could not renew" in r.getMessage()],
            timeout=5,
            what="the keeper's warning",
        )
    finally:
        keeper.release()

    assert warned[0].threadName == "lease-keeper"
    assert warned[0].run_context == " [run=r-1 stage=extract attempt=3]"
