"""Webhook deliveries on the engine's queues: one RQ queue (QUEUE) that the webhook workers
read, one job per turn of an endpoint (webhooks/delivery.py).

A turn's job id names the endpoint and its turn number, so every event written while a
turn waits in the queue asks for the same job and only one exists; a turn that runs out
of time asks for the next by its `on_success` callback, as the stages chain theirs. The
sweeper (each pass) wakes the endpoints with deliveries due and no worker holding them:
retries coming due, turns whose job was lost with Redis, turns of a killed worker once
its lease expired. Enqueue failures are logged, never raised: the sweeper repairs them.
"""

import logging
from collections.abc import Iterable

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from redis import Redis
from redis.exceptions import RedisError

from core.redis import caller_connection, redis_connection
from pipeline import broker
from webhooks.events import Wake, event_record
from webhooks.limits import lease, try_seconds, turn_seconds
from webhooks.models import DeliveryStatus, WebhookDelivery, WebhookEndpoint

logger = logging.getLogger(__name__)

QUEUE = "webhooks"
TURN_FUNCTION = "webhooks.delivery.endpoint_turn"
ON_SUCCESS = "webhooks.dispatch.on_turn_success"
ON_FAILURE = "webhooks.dispatch.on_turn_failure"
# RQ statuses of a job that will still run without anyone's help.
_WAITING = frozenset({"queued", "scheduled", "deferred"})
# Endpoints the sweeper wakes in one pass.
WAKES_PER_PASS = 200


def turn_job_id(endpoint_id, turn: int) -> str:
    return f"webhooks-{endpoint_id}-{turn}"


def event_publish(*, organisation_id: int, type: str, data: dict, in_request: bool = False):
    """Write event `type` in the caller's transaction for the endpoints that want it, and
    wake them once it commits (`in_request`: within a request's budget for Redis)."""
    wakes = event_record(organisation_id=organisation_id, type=type, data=data)
    if wakes:
        transaction.on_commit(lambda: endpoints_wake(wakes, in_request=in_request))


def endpoints_wake(wakes: Iterable[Wake], *, in_request: bool = False) -> int:
    """Ask for each endpoint's turn; how many new jobs were queued."""
    connection, breaker = caller_connection(in_request=in_request)
    if connection is None:
        return 0
    queued = 0
    try:
        for wake in wakes:
            queued += _enqueue(connection, wake)
    except Exception as exc:  # Redis's, or anything else: logged, never raised
        if breaker is not None and isinstance(exc, RedisError):
            breaker.trip("queuing webhook turns")
        logger.warning("could not queue webhook deliveries; the sweeper will", exc_info=True)
    return queued


def _enqueue(connection: Redis, wake: Wake) -> bool:
    return broker.enqueue(
        connection=connection,
        lane=QUEUE,
        job_id=turn_job_id(wake.endpoint_id, wake.turn),
        func=TURN_FUNCTION,
        args=(str(wake.endpoint_id),),
        # A turn's tries, each within its time limit, and the last one's records.
        timeout=int(turn_seconds() + 2 * try_seconds()) + 1,
        on_success=ON_SUCCESS,
        on_failure=ON_FAILURE,
    )


def on_turn_success(job: broker.RQJob, connection: Redis, result, *args, **kwargs) -> None:
    """RQ's `on_success` callback of a turn: another turn when this one left work due."""
    if result and result.get("more"):
        endpoints_wake([Wake(result["endpoint_id"], result["turn"])])


def on_turn_failure(job: broker.RQJob, connection: Redis, *exc_info) -> None:
    """RQ's `on_failure` callback of a turn that raised: its lease expires and the sweeper
    wakes the endpoint; nothing to do here but say so."""
    logger.warning("webhook turn %s failed; the sweeper will wake its endpoint", job.id)


def _alive(job: broker.JobHash, now) -> bool:
    """Whether a turn's job will still run. One started under the endpoint's free lease
    has not taken it yet: alive for a moment, dead (its worker killed before the claim)
    after a lease's length."""
    if job.status in _WAITING:
        return True
    return job.status == "started" and job.started_at is not None and now - job.started_at < lease()


def endpoints_wake_due() -> int:
    """The sweeper's step: wake each endpoint with deliveries due whose lease is free and
    whose turn's job is not waiting or running. How many were woken."""
    now = timezone.now()
    due = (
        WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
        .values_list("endpoint_id", flat=True)
        .distinct()[:WAKES_PER_PASS]
    )
    endpoints = list(
        WebhookEndpoint.objects.filter(
            Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now),
            id__in=list(due),
            enabled=True,
        ).values_list("id", "turn")
    )
    if not endpoints:
        return 0
    connection = redis_connection()
    ids = [turn_job_id(endpoint_id, turn) for endpoint_id, turn in endpoints]
    woken = 0
    for (endpoint_id, turn), job_id, job in zip(
        endpoints, ids, broker.jobs_read(connection, ids), strict=True
    ):
        if _alive(job, now):
            continue
        if job.status != "missing":
            # Ended without a turn (failed, stopped): its id is free again once it is gone.
            broker.job_delete(connection, job_id)
        woken += _enqueue(connection, Wake(endpoint_id, turn))
    return woken
