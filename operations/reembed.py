"""Re-embedding on the bulk lanes: `manage.py reembed`, the organisations' admin action and
the sweeper's housekeeping start it here; retrieval/reembed.py does the work.

Each document whose searchable chunks are not all on the current model gets one RQ job on
a bulk lane of the embed stage (pipeline/lanes.py chooses which), so the embed workers take
it after people's uploads, and it pauses with them while the provider keeps failing. The
job id names the document and the model, so asking again while a job waits adds nothing.
A job whose worker was killed leaves its RQ record "started" with no beat behind it:
asking again enqueues it anew, and it goes on from the chunks still to do. The sweeper's
housekeeping asks again for every re-embed that was started and is not finished, except
a document whose job failed: that one waits for a person (the dashboard lists it;
`manage.py reembed` or the admin action tries it again), or every pass would repeat a
failure that will not mend by itself (a refused input, a billing problem).
"""

import hashlib
import json
import logging
import uuid
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone
from redis.exceptions import RedisError
from rq import get_current_job
from rq.job import Job, JobStatus

from core.redis import redis_connection, stats_connection
from documents.models import Organisation
from pipeline.broker import get_queue
from pipeline.lanes import lane_choose
from pipeline.models import RunPriority, Stage
from pipeline.stage_list import stage_spec
from retrieval.embedding import get_embedder
from retrieval.reembed import document_reembed, documents_to_reembed

logger = logging.getLogger(__name__)

JOB = "operations.reembed.reembed_document_job"
# A running job's beat, renewed before each batch for PAPERLANE_LEASE_SECONDS (the
# stages' own bound for noticing a dead worker): a job whose worker died has none. A batch
# slower than that can let a second job start beside it, which only repeats chunks.
BEAT = "paperlane:reembed:beat:{job_id}"
# The organisations whose re-embed was asked for and is not finished ("*": all of them).
WANTED = "paperlane:reembed:wanted"
WAITING = {JobStatus.QUEUED, JobStatus.SCHEDULED, JobStatus.DEFERRED}
# The re-embeds whose job failed, by job id: {"document_id", "model", "error", "at"} as JSON.
FAILED = "paperlane:reembed:failed"
FAILED_SHOWN = 25


@dataclass(frozen=True)
class ReembedQueued:
    model: str
    documents: int  # documents with chunks on another model
    queued: int  # jobs enqueued now (the others were already waiting or running)
    failed: int = 0  # documents left alone because their job failed (`retry_failed` off)


@dataclass(frozen=True)
class ReembedFailure:
    document_id: str
    model: str
    error: str
    at: str


def reembed_job_id(*, document_id, model: str) -> str:
    digest = hashlib.sha256(model.encode()).hexdigest()[:12]
    return f"reembed-{document_id}-{digest}"


def _alive(connection, job_id: str) -> bool:
    """Whether the job waits in a queue, or runs with a beat."""
    status = connection.hget(Job.redis_job_namespace_prefix + job_id, "status")
    if status is None:
        return False
    status = status.decode()
    if status in WAITING:
        return True
    return status == JobStatus.STARTED and bool(connection.exists(BEAT.format(job_id=job_id)))


def _failure_record(connection, job_id: str, *, document_id, model: str, error: str) -> None:
    record = {
        "document_id": str(document_id),
        "model": model,
        "error": error[:500],
        "at": timezone.now().isoformat(timespec="seconds"),
    }
    connection.hset(FAILED, job_id, json.dumps(record))


def _failed(connection, job_id: str, *, document_id, model: str) -> bool:
    """Whether the document's re-embed job failed (recorded by the job, or only in RQ's
    record when its work horse died)."""
    if connection.hexists(FAILED, job_id):
        return True
    status = connection.hget(Job.redis_job_namespace_prefix + job_id, "status")
    if status is None or status.decode() != JobStatus.FAILED:
        return False
    _failure_record(
        connection, job_id, document_id=document_id, model=model, error="the job failed"
    )
    return True


def reembed_enqueue(
    *, organisation: Organisation | None = None, retry_failed: bool = True
) -> ReembedQueued:
    """Queue a re-embed of every document of `organisation` (or of all) whose searchable
    chunks are not all on the current model, on the embed stage's bulk lanes. A document
    whose job failed is queued again only with `retry_failed` (a person asking)."""
    model = get_embedder().name
    connection = redis_connection()
    connection.sadd(WANTED, str(organisation.id) if organisation else "*")
    rows = documents_to_reembed(organisation=organisation)
    spec = stage_spec(Stage.EMBED)
    documents = queued = failed = 0
    for document_id, organisation_id in rows.iterator():
        documents += 1
        job_id = reembed_job_id(document_id=document_id, model=model)
        if _alive(connection, job_id):
            continue
        if retry_failed:
            connection.hdel(FAILED, job_id)
        elif _failed(connection, job_id, document_id=document_id, model=model):
            failed += 1
            continue
        connection.delete(Job.redis_job_namespace_prefix + job_id)  # ended, or its worker died
        lane = lane_choose(
            connection=connection,
            stage=Stage.EMBED,
            priority=RunPriority.BULK,
            organisation_id=str(organisation_id),
        )
        get_queue(lane, connection=connection).enqueue(
            JOB,
            str(document_id),
            job_id=job_id,
            job_timeout=spec.timeout,
            result_ttl=0,
            failure_ttl=7 * 24 * 3600,
            description=f"re-embed document {document_id} with {model}",
        )
        queued += 1
    if not documents:
        connection.srem(WANTED, str(organisation.id) if organisation else "*")
    return ReembedQueued(model=model, documents=documents, queued=queued, failed=failed)


def reembed_document_job(document_id: str) -> int:
    """The RQ job: re-embed one document's searchable chunks (retrieval/reembed.py)."""
    job = get_current_job()
    key = BEAT.format(job_id=job.id if job else document_id)
    connection = redis_connection()

    def beat() -> None:
        connection.set(key, b"1", px=int(settings.PAPERLANE_LEASE_SECONDS * 1000))

    beat()
    try:
        done = document_reembed(document_id=uuid.UUID(document_id), beat=beat)
    except Exception as exc:
        if job is not None:
            model = get_embedder().name
            _failure_record(
                connection, job.id, document_id=document_id, model=model, error=str(exc)
            )
        raise
    else:
        if job is not None:
            connection.hdel(FAILED, job.id)
        return done
    finally:
        connection.delete(key)


def reembed_in_progress() -> bool:
    """Whether a re-embed was asked for and has not been seen finished (False when Redis
    does not answer: the dashboard then leaves its section out)."""
    try:
        return bool(stats_connection().scard(WANTED))
    except RedisError:
        return False


def reembed_failures(*, limit: int = FAILED_SHOWN) -> list[ReembedFailure]:
    """The re-embeds whose job failed and was not tried again, newest first (none when
    Redis does not answer)."""
    try:
        records = stats_connection().hvals(FAILED)
    except RedisError:
        return []
    failures = [ReembedFailure(**json.loads(record)) for record in records]
    failures.sort(key=lambda failure: failure.at, reverse=True)
    return failures[:limit]


def reembed_resume() -> int:
    """Housekeeping: ask again for each re-embed that was started and has not finished
    (a job lost with its worker is queued anew). Returns the jobs queued."""
    try:
        wanted = [member.decode() for member in redis_connection().smembers(WANTED)]
    except RedisError:
        return 0
    queued = 0
    for member in wanted:
        if member == "*":
            queued += reembed_enqueue(retry_failed=False).queued
            continue
        organisation = Organisation.objects.filter(id=member).first()
        if organisation is None:
            redis_connection().srem(WANTED, member)
            continue
        queued += reembed_enqueue(organisation=organisation, retry_failed=False).queued
    return queued
