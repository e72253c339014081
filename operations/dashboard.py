"""The pipeline dashboard in the admin: every stage, the workers, what needs attention.

Staff with the permission `operations.view_pipeline` (config/urls.py wraps it in
`admin.site.admin_view` and a permission check). It reads the same selectors as
/metrics and draws its charts as inline SVG.
"""

from datetime import timedelta

from django.conf import settings
from django.contrib import admin
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils import timezone

from operations.charts import lag_chart, throughput_chart
from operations.stats.attention import attention
from operations.stats.history import MINUTES, throughput_by_minute
from operations.stats.provider import provider_stats
from operations.stats.snapshot import pipeline_snapshot
from operations.stats.totals import attempt_totals, attempts_counted
from pipeline.lag import lag_history, lag_sample_record
from pipeline.models import StageAttempt
from pipeline.selectors import reembeds_failed, reembeds_in_progress
from pipeline.stage_list import STAGES
from pipeline.stages.ocr import languages_of, ocr_engine_unavailable, ocr_unavailable
from retrieval.coverage import embedding_coverage_by_organisation
from retrieval.embedding import get_embedder
from webhooks.selectors import webhook_stats

ORGANISATIONS_SHOWN = 25
REFRESH_SECONDS = 15
OUTCOME_LABELS = dict(StageAttempt.Outcome.choices)
STAGE_ORDER = {str(spec.name): number for number, spec in enumerate(STAGES)}


def _outcome_rows(now) -> tuple[list[dict], dict[str, int]]:
    """Finished attempts by stage, outcome and error code, the last hour and since counting
    began; and retries by stage since counting began."""
    recent = StageAttempt.objects.filter(finished_at__gte=now - timedelta(hours=1))
    last_hour = attempts_counted(recent)
    since_start = attempt_totals(now=now)
    keys = set(last_hour.attempts) | set(since_start.attempts)
    rows = [
        {
            "stage": stage,
            "outcome": OUTCOME_LABELS.get(outcome, outcome),
            "failed": outcome != StageAttempt.Outcome.SUCCEEDED,
            "error": error,
            "last_hour": last_hour.attempts.get((stage, outcome, error), 0),
            "total": since_start.attempts.get((stage, outcome, error), 0),
        }
        for stage, outcome, error in keys
    ]
    rows.sort(key=lambda r: (STAGE_ORDER.get(r["stage"], 99), r["failed"], -r["total"]))
    retries = {stage: since_start.retries.get(stage, 0) for stage in STAGE_ORDER}
    return rows, retries


def _reembed_progress() -> dict:
    """A re-embed's progress: how many runs it has in the pipeline, and the organisations
    with chunks on another model than the current one, counted only while it has (a pass
    over every searchable chunk is too much for each refresh of the page otherwise). And
    the re-embeds whose run ended without success: they wait for a person."""
    failures = reembeds_failed(limit=ORGANISATIONS_SHOWN)
    running = reembeds_in_progress()
    coverage = embedding_coverage_by_organisation(limit=ORGANISATIONS_SHOWN) if running else []
    return {
        "reembed_in_progress": running,
        "reembedding": coverage,
        "reembed_failures": failures,
    }


def pipeline_dashboard_view(request: HttpRequest) -> TemplateResponse:
    now = timezone.now()
    snapshot = pipeline_snapshot(now=now, organisations_limit=ORGANISATIONS_SHOWN)
    lag_sample_record(read_lags=lambda: {s.name: s.lag_seconds for s in snapshot.stages}, now=now)
    minutes = throughput_by_minute(now=now)
    outcomes, retries = _outcome_rows(now)
    context = {
        **admin.site.each_context(request),
        "title": "Pipeline dashboard",
        "snapshot": snapshot,
        "attention": attention(snapshot),
        "throughput": throughput_chart(minutes),
        "lag": lag_chart(
            lag_history(now=now, minutes=MINUTES),
            starts=[m.start for m in minutes],
            stages=[s.name for s in snapshot.stages],
            limit=settings.PAPERLANE_ATTENTION_LAG_SECONDS,
        ),
        "outcomes": outcomes,
        "retries": retries,
        "refresh_seconds": REFRESH_SECONDS,
        "lag_limit": settings.PAPERLANE_ATTENTION_LAG_SECONDS,
        "failure_limit": settings.PAPERLANE_ATTENTION_FAILURE_RATE,
        "stuck_after": settings.PAPERLANE_STUCK_AFTER_SECONDS,
        "embedding_model": get_embedder().name,
        # OCR of pages without text: the server's languages, or why it is off.
        "ocr_languages": settings.PAPERLANE_OCR_LANGUAGES,
        "ocr_off": ocr_engine_unavailable() or ocr_unavailable(
            languages_of(settings.PAPERLANE_OCR_LANGUAGES)
        ),
        "webhooks": webhook_stats(now=now),
        # The embedding provider's breaker, the runs waiting for it, its last error.
        "provider": provider_stats(now=now),
        **_reembed_progress(),
    }
    return TemplateResponse(request, "admin/pipeline/dashboard.html", context)
