"""Workers ride out a Redis restart without losing or duplicating a run.

The workers' Redis here is a private redis-server (never the shared one): with
twenty uploads in flight it is SIGKILLed, stays away a few seconds, and starts
again on the same port, empty. Workers that lose Redis mid-stage quit; the
supervisor holds their restarts until Redis answers (no crash loop), then
restarts every worker so each registers with the new server, and the sweeper
delivers again from the database what Redis lost.
"""

import re
import time
from collections import Counter

import pytest
from redis import Redis

from pipeline.models import ImportRun, RunSource, StageAttempt
from pipeline.queues import all_queue_names
from pipeline.stage_list import SOURCE_STAGES, stage_spec
from tests.support.files import make_pdf
from tests.support.integrity import integrity_problems
from tests.support.pipeline import TEST_PIPELINE_ENV, wait_for, wait_terminal
from tests.support.processes import process_env, run_workers_process
from tests.support.redis_server import private_redis
from tests.support.uploads import accepted_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

UPLOADS = 20
DOWN_SECONDS = 4
# Embedding takes a while, like a remote model, so stages are mid-flight at the crash.
ENV = {"PAPERLANE_EMBEDDER": "tests.support.embedders.SlowEmbedder", "EMBED_DELAY": "0.3"}


def served_queues(url: str) -> set[str]:
    """The queues the workers registered with this Redis serve."""
    client = Redis.from_url(url)
    served = set()
    for key in client.smembers("rq:workers"):
        queues = client.hget(key, "queues")
        served.update((queues or b"").decode().split(","))
    client.close()
    return served


def test_workers_ride_out_a_redis_restart(api, org, settings, tmp_path):
    log_path = tmp_path / "run_workers.log"
    with private_redis() as server, open(log_path, "w") as log:
        # The test's own clients (the accept path) and the workers' use the private server.
        settings.REDIS_URL = server.url()
        stages = set(all_queue_names())
        environment = process_env(**{**TEST_PIPELINE_ENV, **ENV, "LOG_LEVEL": "INFO"})
        args = ("--concurrency", "extract=1,ocr=1,embed=1")
        with run_workers_process(env=environment, args=args, stdout=log) as supervisor:
            wait_for(
                lambda: served_queues(server.url()) >= stages,
                timeout=60,
                what="a worker on every queue",
            )
            runs = [accepted_run(api, make_pdf(2, label=f"Doc {n}")) for n in range(UPLOADS)]
            run_ids = [r.id for r in runs]
            wait_for(
                lambda: ImportRun.objects.filter(id__in=run_ids, status="succeeded").count() >= 2,
                timeout=60,
                what="the first runs to finish",
            )
            in_flight = ImportRun.objects.filter(id__in=run_ids).exclude(status="succeeded")
            assert in_flight.count() >= UPLOADS // 2, "too few runs left in flight"

            server.kill()
            time.sleep(DOWN_SECONDS)
            server.start()  # the same port, empty

            finished = wait_terminal(run_ids, timeout=120)
            # The workers came back and registered with the new server; none gave up.
            wait_for(
                lambda: served_queues(server.url()) >= stages,
                timeout=30,
                what="a worker on every queue of the new Redis",
            )
            assert supervisor.poll() is None, "run_workers exited"

    assert integrity_problems(list(finished.values()), pages=2) == {}
    # Exactly once: one succeeded attempt per stage of each run.
    succeeded = Counter(
        StageAttempt.objects.filter(run_id__in=run_ids, outcome="succeeded").values_list(
            "run_id", "stage"
        )
    )
    assert set(succeeded.values()) == {1}
    # A PDF with text passes over the optional OCR stage.
    stages = [name for name in SOURCE_STAGES[RunSource.API] if not stage_spec(name).optional]
    assert len(succeeded) == UPLOADS * len(stages)
    text = log_path.read_text()
    assert "Redis is not answering" in text and "Redis restarted" in text
    # No crash loop: no child was restarted after a pause, as a quick death repeated would be.
    supervised = "\n".join(line for line in text.splitlines() if "pipeline.supervisor" in line)
    assert not re.search(r"restarting in [1-9]", text), supervised
