"""The floor's stage: a no-op RQ job that hands the document to the next queue.

    python bench/_floor_stage_worker.py QUEUE   # one RQ SimpleWorker on QUEUE

No Django and no database: what is left is RQ's own cost of a five-stage chain
(dequeue, job load, the work horse bookkeeping, the hand-off by a deterministic
job id). bench/floor.py enqueues the first stage and starts these workers; the
process name contains "stage_worker" so bench/_cpu.py's CpuMeter counts it as one.
"""

import os
import socket
import sys
import time

from redis import Redis
from rq import Callback, Queue, get_current_job
from rq.worker import SimpleWorker

# The same registration lifetime as our stage_worker command.
WORKER_TTL_SECONDS = 35
FIRST_KEY, DONE_KEY, LAST_KEY = "floor:first", "floor:done", "floor:last"


def job_id(doc: str, stage: str) -> str:
    # Deterministic per (document, stage), as ours is per (run, generation, stage, attempt).
    return f"floor-{doc}-0-{stage}-0"


def job_options(doc: str, stage: str, chain: str) -> dict:
    options = {
        "job_id": job_id(doc, stage),
        "job_timeout": 300,
        "result_ttl": 0,
        "failure_ttl": 7 * 24 * 3600,
    }
    if chain == "on_success":
        options["on_success"] = Callback(on_success, timeout=30)
    return options


def enqueue(connection: Redis, doc: str, stages: list[str], index: int, chain: str) -> None:
    stage = stages[index]
    Queue(stage, connection=connection).enqueue(
        floor_stage, doc, stages, index, chain, unique=True, **job_options(doc, stage, chain)
    )


def floor_stage(doc: str, stages: list[str], index: int, chain: str) -> dict | None:
    """A stage with nothing to do: note the times the bench reads, hand over."""
    connection = get_current_job().connection
    if index == 0:
        connection.set(FIRST_KEY, time.time(), nx=True)
    if index == len(stages) - 1:
        with connection.pipeline(transaction=False) as pipe:
            pipe.incr(DONE_KEY)
            pipe.set(LAST_KEY, time.time())
            pipe.execute()
        return None
    if chain == "direct":
        enqueue(connection, doc, stages, index + 1, chain)
        return None
    return {"doc": doc, "stages": stages, "index": index + 1}


def on_success(job, connection, result, *args, **kwargs) -> None:
    """RQ on_success callback: enqueue the next stage the job returned."""
    if result:
        enqueue(connection, result["doc"], result["stages"], result["index"], "on_success")


def main() -> None:
    queue = sys.argv[1]
    connection = Redis.from_url(os.environ["REDIS_URL"])
    worker = SimpleWorker(
        [Queue(queue, connection=connection)],
        connection=connection,
        name=f"{socket.gethostname()}.{os.getpid()}.floor-{queue}",
        worker_ttl=WORKER_TTL_SECONDS,
    )
    worker.work(logging_level="WARNING")


if __name__ == "__main__":
    main()
