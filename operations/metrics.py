"""`/metrics`: the pipeline in Prometheus' text format, for staff with the permission
`operations.view_pipeline` or a bearer token.

A custom collector reads the same selectors as the dashboard (`operations.stats`) at
scrape time, so both show the same numbers. Counters are counts of database
rows (stage attempts) or Redis counters (uploads): they only go up, and a
Prometheus `rate()` turns them into the dashboard's per-minute figures.
"""

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector
from redis.exceptions import RedisError

from core.redis import stats_connection
from core.upload_counts import upload_counts
from operations.models import VIEW_PIPELINE
from operations.stats.provider import ProviderStats, provider_stats
from operations.stats.snapshot import PipelineSnapshot, StageStats, pipeline_snapshot
from operations.stats.totals import DURATION_BUCKETS, AttemptTotals, attempt_totals
from pipeline.lag import lag_sample_record
from pipeline.services.admission import admission_refusal_counts
from webhooks.selectors import WebhookStats, webhook_stats

# stage gauge name -> (help, the StageStats field it reports)
STAGE_GAUGES = {
    "paperlane_stage_waiting_jobs": (
        "Jobs waiting in the stage's RQ queues (all its lanes).",
        "waiting",
    ),
    "paperlane_stage_started_jobs": (
        "Jobs in the started registries of the stage's RQ queues.",
        "started_jobs",
    ),
    "paperlane_stage_scheduled_jobs": (
        "Jobs in the scheduled registries of the stage's RQ queues (retries waiting out "
        "their backoff).",
        "scheduled_jobs",
    ),
    "paperlane_stage_queue_lag_seconds": (
        "Age of the oldest job at the head of one of the stage's RQ queues (0 when all are empty).",
        "queue_lag_seconds",
    ),
    "paperlane_stage_workers": ("Live RQ workers that serve the stage's queues.", "workers"),
    "paperlane_stage_due_runs": ("Runs due in this stage that no worker holds.", "due"),
    "paperlane_stage_running_runs": (
        "Runs in this stage held by a worker with a live lease.",
        "running",
    ),
    "paperlane_stage_retry_scheduled_runs": (
        "Runs in this stage due later (a retry waiting out its backoff).",
        "retry_scheduled",
    ),
    "paperlane_stage_stuck_runs": (
        "Runs in this stage with no progress for PAPERLANE_STUCK_AFTER_SECONDS or an "
        "expired lease.",
        "stuck",
    ),
    "paperlane_stage_lag_seconds": (
        "Age of the oldest run due in this stage that no worker holds (0 when none).",
        "lag_seconds",
    ),
    "paperlane_stage_failed_runs_last_hour": (
        "Runs that failed in this stage in the last hour.",
        "failed_last_hour",
    ),
    "paperlane_stage_dead_lettered_runs_last_hour": (
        "Runs dead-lettered in this stage in the last hour.",
        "dead_lettered_last_hour",
    ),
}
# Fields read from Redis: left out of a scrape Redis did not answer, not reported as 0.
REDIS_FIELDS = {"waiting", "started_jobs", "scheduled_jobs", "queue_lag_seconds", "workers"}


def _stage_families(snapshot: PipelineSnapshot):
    for name, (documentation, field_name) in STAGE_GAUGES.items():
        if field_name in REDIS_FIELDS and not snapshot.redis_ok:
            continue
        family = GaugeMetricFamily(name, documentation, labels=["stage"])
        for stage in snapshot.stages:
            family.add_metric([stage.name], float(getattr(stage, field_name) or 0))
        yield family
    if snapshot.redis_ok:
        yield from _priority_families(snapshot)
    quantiles = GaugeMetricFamily(
        "paperlane_stage_duration_last_hour_seconds",
        "Stage attempt durations over the last hour, by quantile (absent when none).",
        labels=["stage", "quantile"],
    )
    for stage in snapshot.stages:
        for quantile, value in _quantiles(stage):
            if value is not None:
                quantiles.add_metric([stage.name, quantile], value)
    yield quantiles


def _priority_families(snapshot: PipelineSnapshot):
    waiting = GaugeMetricFamily(
        "paperlane_queue_waiting_jobs",
        "Jobs waiting in the stage's RQ queues of one priority (interactive or bulk).",
        labels=["stage", "priority"],
    )
    lag = GaugeMetricFamily(
        "paperlane_queue_lag_seconds",
        "Age of the oldest job at the head of one of the stage's RQ queues of one priority "
        "(0 when all are empty).",
        labels=["stage", "priority"],
    )
    for stage in snapshot.stages:
        for queue in stage.priorities or ():
            waiting.add_metric([stage.name, queue.priority], queue.waiting)
            lag.add_metric([stage.name, queue.priority], queue.queue_lag_seconds or 0.0)
    yield waiting
    yield lag


def _quantiles(stage: StageStats):
    return (("0.5", stage.p50_seconds), ("0.95", stage.p95_seconds))


def _total_families(totals: AttemptTotals):
    attempts = CounterMetricFamily(
        "paperlane_stage_attempts",
        "Stage attempts finished, by outcome and error code.",
        labels=["stage", "outcome", "code"],
    )
    for (stage, outcome, code), count in sorted(totals.attempts.items()):
        attempts.add_metric([stage, outcome, code or "none"], count)
    yield attempts
    retries = CounterMetricFamily(
        "paperlane_stage_retries",
        "Stage attempts that repeated a stage of the same run (retries and redeliveries).",
        labels=["stage"],
    )
    for stage, count in sorted(totals.retries.items()):
        retries.add_metric([stage], count)
    yield retries
    durations = HistogramMetricFamily(
        "paperlane_stage_duration_seconds",
        "How long stage attempts that ran to an outcome took.",
        labels=["stage"],
    )
    for stage, histogram in sorted(totals.durations.items()):
        buckets = [(_bound(b), n) for b, n in zip(DURATION_BUCKETS, histogram.buckets, strict=True)]
        buckets.append(("+Inf", histogram.count))
        durations.add_metric([stage], buckets, sum_value=histogram.sum_seconds)
    yield durations


def _bound(seconds: float) -> str:
    return repr(float(seconds))


class PipelineCollector(Collector):
    """Reads the pipeline's selectors each time Prometheus scrapes."""

    def collect(self):
        now = timezone.now()
        snapshot = pipeline_snapshot(now=now)
        lag_sample_record(
            read_lags=lambda: {s.name: s.lag_seconds for s in snapshot.stages}, now=now
        )
        yield from _stage_families(snapshot)
        yield from _total_families(attempt_totals(now=now))
        yield from _worker_families(snapshot)
        yield from _upload_families()
        yield from _organisation_families(snapshot)
        yield from _webhook_families(webhook_stats(now=now))
        yield from _provider_families(provider_stats(now=now))


def _provider_families(stats: ProviderStats):
    if stats.state is not None:  # Redis answered
        yield GaugeMetricFamily(
            "paperlane_embedding_provider_open",
            "1 while the embedding provider's breaker is open (it opened and no call has "
            "gone through since: an outage), else 0.",
            value=1 if stats.out else 0,
        )
        yield GaugeMetricFamily(
            "paperlane_embedding_provider_failures",
            "Calls to the embedding provider that failed in a row while its breaker was closed.",
            value=stats.failures,
        )
    yield GaugeMetricFamily(
        "paperlane_runs_waiting_for_provider",
        "Runs at embed whose last try failed while the embedding provider was out: they "
        "keep their tries and go on when it answers.",
        value=stats.waiting,
    )


def _webhook_families(stats: WebhookStats):
    yield GaugeMetricFamily(
        "paperlane_webhook_pending_deliveries",
        "Webhook deliveries not yet received, with tries left (due now or later).",
        value=stats.pending,
    )
    tries = GaugeMetricFamily(
        "paperlane_webhook_tries_last_hour",
        "Webhook tries begun in the last hour, by outcome (failed: no 2xx in time).",
        labels=["outcome"],
    )
    for outcome, count in stats.tries_last_hour.items():
        tries.add_metric([outcome], count)
    yield tries
    yield GaugeMetricFamily(
        "paperlane_webhook_lag_seconds",
        "How long the oldest webhook delivery that is due has waited (0 when none is).",
        value=stats.lag_seconds,
    )
    endpoints = GaugeMetricFamily(
        "paperlane_webhook_endpoints",
        "Webhook endpoints: enabled, failing (enabled, failing since their last success), "
        "disabled.",
        labels=["state"],
    )
    for state, count in stats.endpoints.items():
        endpoints.add_metric([state], count)
    yield endpoints


def _worker_families(snapshot: PipelineSnapshot):
    up = GaugeMetricFamily("paperlane_redis_up", "1 if Redis answered this scrape, else 0.")
    up.add_metric([], 1 if snapshot.redis_ok else 0)
    yield up
    if snapshot.workers is None:
        return
    suspended = GaugeMetricFamily(
        "paperlane_workers_suspended", "1 while RQ workers are suspended (rq suspend)."
    )
    suspended.add_metric([], 1 if snapshot.suspended else 0)
    yield suspended
    by_state: dict[str, int] = {}
    for worker in snapshot.workers:
        by_state[worker.state] = by_state.get(worker.state, 0) + 1
    workers = GaugeMetricFamily("paperlane_workers", "Live RQ workers by state.", labels=["state"])
    for state, count in sorted(by_state.items()):
        workers.add_metric([state], count)
    yield workers


def _upload_families():
    try:
        counts = upload_counts(connection=stats_connection())
    except RedisError:
        return
    uploads = CounterMetricFamily(
        "paperlane_uploads",
        "Uploads answered at the API and the upload page: accepted, replayed (a repeated "
        "Idempotency-Key), duplicate (bytes of a live document, answered with it) or "
        "refused, with the refusal's error code.",
        labels=["channel", "result", "code"],
    )
    for (channel, result, code), count in sorted(counts.items()):
        uploads.add_metric([channel, result, code], count)
    yield uploads
    try:
        by_reason = admission_refusal_counts(connection=stats_connection())
    except RedisError:
        return
    refused = CounterMetricFamily(
        "paperlane_uploads_refused",
        "Uploads refused at admission (429) because the interactive backlog was full "
        "(backlog), a run waited past the promise (late) or the organisation had its "
        "bound of runs in flight (organisation).",
        labels=["reason"],
    )
    for reason, count in sorted(by_reason.items()):
        refused.add_metric([reason], count)
    yield refused


def _organisation_families(snapshot: PipelineSnapshot):
    families = {
        "used": GaugeMetricFamily(
            "paperlane_organisation_pages_used",
            "Pages charged to the organisation.",
            labels=["organisation"],
        ),
        "reserved": GaugeMetricFamily(
            "paperlane_organisation_pages_reserved",
            "Pages held for the organisation's documents in progress.",
            labels=["organisation"],
        ),
        "limit": GaugeMetricFamily(
            "paperlane_organisation_pages_limit",
            "The organisation's page limit.",
            labels=["organisation"],
        ),
    }
    for organisation in snapshot.organisations:
        families["used"].add_metric([organisation.slug], organisation.pages_used)
        families["reserved"].add_metric([organisation.slug], organisation.pages_reserved)
        families["limit"].add_metric([organisation.slug], organisation.page_limit)
    yield from families.values()


def _refusal(request: HttpRequest) -> HttpResponse | None:
    """None if the request may read the metrics, else the response that refuses it."""
    token = settings.PAPERLANE_METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    scheme, _, given = header.partition(" ")
    if token and scheme.lower() == "bearer":
        if hmac.compare_digest(given.strip().encode(), token.encode()):
            return None
    user = request.user
    if user.is_active and user.is_staff and user.has_perm(VIEW_PIPELINE):
        return None
    if header or user.is_authenticated:
        return HttpResponse("Forbidden.\n", status=403, content_type="text/plain")
    response = HttpResponse(
        "Log in as an operator or send Authorization: Bearer <PAPERLANE_METRICS_TOKEN>.\n",
        status=401,
        content_type="text/plain",
    )
    response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response


@never_cache
@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    if (refused := _refusal(request)) is not None:
        return refused
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PipelineCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
