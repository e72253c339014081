"""RQ worker classes that die at the exact moments RQ is fragile, for worker tests.

Workers load them through PAPERLANE_WORKER_CLASS. Each dies once (per Redis
database) at its moment, the way SIGKILL or the OOM killer would.
"""

import os
import signal

from rq.worker import SimpleWorker

from core.redis import redis_connection
from pipeline.models import RunSource
from pipeline.queues import queue_stage
from pipeline.stage_list import first_stage


def _first_time(tag: str) -> bool:
    return redis_connection().set(f"test:died:{tag}", "1", nx=True) is not None


class DiesAfterCallbackWorker(SimpleWorker):
    """Dies after the job of an upload's first stage ran its on_success callback, before
    RQ marks the job finished."""

    def handle_job_success(self, job, queue, started_job_registry):
        if queue_stage(job.origin) == first_stage(RunSource.API) and _first_time("after-callback"):
            os.kill(os.getpid(), signal.SIGKILL)
        return super().handle_job_success(job, queue, started_job_registry)
