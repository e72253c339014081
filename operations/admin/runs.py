"""The operator's admin for the pipeline: runs, their attempts and history, and actions.

Runs and attempts are records: nobody edits them by hand. Operators act on runs
through the services (requeue, retry, cancel, dead-letter; see run_actions.py),
each behind a confirmation that asks for a reason. Lists stay fast on big tables
(FastListAdmin in listing.py, the filters and searches in run_lists.py): joined
columns are selected with the rows, filters read indexes, ids are searched by key
and counts are bounded.
"""

import uuid

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import Case, OuterRef, Subquery, Value, When
from django.db.models.functions import Substr
from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from operations.admin.listing import FastListAdmin, OrganisationFilter, RecordAdmin
from operations.admin.run_actions import (
    ACTIONS,
    MAX_RUNS_PER_ACTION,
    ReasonForm,
    RunAction,
    apply,
    runs_for_action,
)
from operations.admin.run_lists import (
    ErrorCodeFilter,
    ErrorTypeFilter,
    StuckFilter,
    duration,
    local_time,
    run_search,
    since,
)
from operations.selectors import (
    ENDED_BADLY,
    STORY_LIMIT,
    dead_letter_group,
    dead_letter_groups,
    run_story,
)
from pipeline.models import ACTIVE_STATUSES, RETRYABLE_STATUSES, ImportRun, StageAttempt
from pipeline.services.transitions import Actor

LAST_ERROR_CHARS = 80
# The last error's characters read for the list, shown on hover over its cut: a traceback
# can be megabytes, and a page of runs reads one per row.
LAST_ERROR_TITLE_CHARS = 1_000


def _time(field: str, label: str):
    """A read-only column or field showing a time to the second, in the site's zone."""

    @admin.display(description=label, ordering=field)
    def show(self, obj):
        return local_time(getattr(obj, field))

    return show


def _flatten(fields) -> list[str]:
    out = []
    for item in fields:
        out.extend(item if isinstance(item, tuple) else [item])
    return out


@admin.register(ImportRun)
class ImportRunAdmin(FastListAdmin, RecordAdmin):
    list_display = [
        "short_id",
        "status",
        "stage",
        "organisation_slug",
        "document_name",
        "attempts",
        "created",
        "age",
        "in_stage",
        "last_error",
    ]
    list_filter = [
        "status",
        "stage",
        OrganisationFilter,
        "source",
        "priority",
        ErrorCodeFilter,
        StuckFilter,
    ]
    list_select_related = ["organisation", "document", "connector_import"]
    ordering = ["-created_at", "-id"]
    # The search itself is run_search (get_search_results); this only shows the box.
    search_fields = ["id"]
    search_help_text = (
        "A run or document id (whole, or its first 6+ characters), an organisation slug, "
        "an error code, or part of a document name or of an error message."
    )
    actions = ["requeue_selected", "retry_selected", "cancel_selected", "dead_letter_selected"]
    change_list_template = "admin/pipeline/importrun/change_list.html"
    change_form_template = "admin/pipeline/importrun/change_form.html"

    created = _time("created_at", "created")
    started = _time("started_at", "started")
    finished = _time("finished_at", "finished")
    updated = _time("updated_at", "last change or progress")
    entered = _time("stage_entered_at", "entered this stage or status")
    due = _time("due_at", "due")
    lease_until = _time("lease_expires_at", "lease expires")

    fieldsets = [
        (
            None,
            {
                "fields": [
                    "id",
                    ("status", "stage", "generation"),
                    ("organisation", "document"),
                    ("source", "priority", "connector_source"),
                    ("created", "started", "finished"),
                    ("entered", "updated", "due"),
                ]
            },
        ),
        (
            "Progress and tries",
            {
                "fields": [
                    ("progress_done", "progress_total"),
                    ("stage_attempts", "total_attempts", "crashes"),
                    ("lease_owner", "lease_until"),
                ]
            },
        ),
        ("Error, as the uploader reads it", {"fields": ["error_code", "error_message"]}),
        (
            "Request",
            {
                "classes": ["collapse"],
                "fields": ["created_by", "api_token", "idempotency_key", "request_sha256"],
            },
        ),
    ]

    readonly_fields = [name for _, group in fieldsets for name in _flatten(group["fields"])]

    # --- The list ----------------------------------------------------------------------

    def get_queryset(self, request):
        last_error = (
            StageAttempt.objects.filter(run=OuterRef("pk"))
            .exclude(error_message="")
            .order_by("-started_at", "-id")
            # One past the title's length, so that the title can say it was cut.
            .annotate(head=Substr("error_message", 1, LAST_ERROR_TITLE_CHARS + 1))
            .values("head")[:1]
        )
        # Looked up only for runs with an error, and only for the rows on the page.
        return (
            super()
            .get_queryset(request)
            .annotate(
                last_error_detail=Case(
                    When(error_code="", then=Value(None)), default=Subquery(last_error)
                )
            )
        )

    def get_search_results(self, request, queryset, search_term):
        return run_search(queryset, search_term), False

    @admin.display(description="run", ordering="id")
    def short_id(self, run):
        return format_html('<span title="{}">{}</span>', run.id, str(run.id)[:8])

    @admin.display(description="organisation", ordering="organisation__slug")
    def organisation_slug(self, run):
        return run.organisation.slug

    @admin.display(description="document")
    def document_name(self, run):
        if run.document is None:
            # A connector's run makes its document in `create`; until then, its file.
            record = getattr(run, "connector_import", None)
            return record.path if record is not None else "(not created yet)"
        name = run.document.filename
        return format_html('<span title="{}">{}</span>', name, _cut(name, 40))

    @admin.display(description="from")
    def connector_source(self, run):
        """A connector's file: its provider and path, linked to its connection."""
        record = getattr(run, "connector_import", None)
        if record is None:
            return "-"
        url = reverse("admin:connectors_connection_change", args=[record.connection_id])
        return format_html(
            '<a href="{}">{}</a>: {} <span class="quiet">(version {})</span>',
            url,
            record.connection.get_provider_display(),
            record.path,
            record.content_version,
        )

    @admin.display(description="attempts (all / stage)")
    def attempts(self, run):
        return f"{run.total_attempts} / {run.stage_attempts}"

    @admin.display(description="age", ordering="created_at")
    def age(self, run):
        return since(run.created_at)

    @admin.display(description="in stage", ordering="stage_entered_at")
    def in_stage(self, run):
        return since(run.stage_entered_at)

    @admin.display(description="last error")
    def last_error(self, run):
        if not run.error_code:
            return ""
        detail = getattr(run, "last_error_detail", None) or run.error_message
        return format_html(
            '<code>{}</code> <span title="{}">{}</span>',
            run.error_code,
            _cut(detail or "", LAST_ERROR_TITLE_CHARS),
            _cut(detail or "", LAST_ERROR_CHARS),
        )

    def changelist_view(self, request, extra_context=None):
        context = {"dead_letter_url": reverse("admin:pipeline_importrun_dead_letter")}
        return super().changelist_view(request, {**context, **(extra_context or {})})

    # --- The run page ------------------------------------------------------------------

    def get_object(self, request, object_id, from_field=None):
        try:
            run_id = uuid.UUID(str(object_id))
        except ValueError:
            return None
        # The run page asks twice (its story, then Django's form): one query.
        cached = getattr(request, "_run_page_run", None)
        if cached is not None and cached.id == run_id:
            return cached
        run = (
            ImportRun.objects.select_related(
                "organisation",
                "document",
                "reservation",
                "created_by",
                "api_token",
                "connector_import__connection",
            )
            .filter(id=run_id)
            .first()
        )
        request._run_page_run = run
        return run

    def change_view(self, request, object_id, form_url="", extra_context=None):
        run = self.get_object(request, object_id)
        context = dict(extra_context or {})
        if run is not None and self.has_view_permission(request, run):
            story = run_story(run)
            context.update(
                story=story,
                story_limit=STORY_LIMIT,
                attempts_rows=[_attempt_row(a) for a in story.attempts],
                transition_rows=[
                    {
                        "from": f"{t.from_status or '-'}/{t.from_stage or '-'}",
                        "to": f"{t.to_status}/{t.to_stage}",
                        "actor": t.actor_label,
                        "when": local_time(t.created_at),
                        "reason": t.reason,
                    }
                    for t in story.transitions
                ],
                run_actions=self._actions_for(request, run),
                reservation=run.reservation,
                reservation_resolved=local_time(run.reservation.resolved_at),
                usage_created=local_time(story.usage.created_at) if story.usage else "",
                job_times={
                    "enqueued": local_time(story.job.enqueued_at) if story.job else "-",
                    "started": local_time(story.job.started_at) if story.job else "-",
                    "ended": local_time(story.job.ended_at) if story.job else "-",
                },
                in_stage=since(run.stage_entered_at),
            )
        return super().change_view(request, object_id, form_url, context)

    def _actions_for(self, request, run: ImportRun) -> list[dict]:
        if not self.has_operate_permission(request):
            return []
        names = (
            ["requeue", "cancel", "dead_letter"]
            if run.status in ACTIVE_STATUSES
            else ["retry"]
            if run.status in RETRYABLE_STATUSES
            else []
        )
        return [
            {
                "label": ACTIONS[name].label,
                "url": reverse("admin:pipeline_importrun_act", args=[name]) + f"?runs={run.id}",
            }
            for name in names
        ]

    # --- Actions -----------------------------------------------------------------------

    def has_operate_permission(self, request) -> bool:
        """Operators act on runs through the services; runs are never edited by hand."""
        return request.user.has_perm("pipeline.change_importrun")

    @admin.action(description="Requeue selected runs whose job is lost…", permissions=["operate"])
    def requeue_selected(self, request, queryset):
        return self._confirm(request, ACTIONS["requeue"], queryset)

    @admin.action(description="Retry selected runs…", permissions=["operate"])
    def retry_selected(self, request, queryset):
        return self._confirm(request, ACTIONS["retry"], queryset)

    @admin.action(description="Cancel selected runs…", permissions=["operate"])
    def cancel_selected(self, request, queryset):
        return self._confirm(request, ACTIONS["cancel"], queryset)

    @admin.action(description="Dead-letter selected runs…", permissions=["operate"])
    def dead_letter_selected(self, request, queryset):
        return self._confirm(request, ACTIONS["dead_letter"], queryset)

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("act/<str:name>/", wrap(self.action_view), name="pipeline_importrun_act"),
            path(
                "dead-letter/", wrap(self.dead_letter_view), name="pipeline_importrun_dead_letter"
            ),
            path(
                "dead-letter/retry/",
                wrap(self.dead_letter_retry_view),
                name="pipeline_importrun_dead_letter_retry",
            ),
            *super().get_urls(),
        ]

    def _confirm(self, request, action: RunAction, queryset, *, form=None, group=None):
        runs, selected = runs_for_action(queryset)
        plan = action.plan(runs)
        form = form or ReasonForm(initial={"runs": " ".join(str(r.id) for r in runs)})
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"{action.label} runs",
            "action": action,
            "form": form,
            "plan": plan,
            "will": [p for p in plan if p.will],
            "left": [p for p in plan if not p.will],
            "selected_more": selected > len(runs),
            "max_runs": MAX_RUNS_PER_ACTION,
            "group": group,
            "post_url": reverse("admin:pipeline_importrun_act", args=[action.name]),
        }
        return TemplateResponse(request, "admin/pipeline/importrun/action.html", context)

    def action_view(self, request, name: str):
        """The confirmation page of an action (GET ?runs=id,id or a list action) and,
        when posted with a reason, the action itself and what it did."""
        action = ACTIONS.get(name)
        if action is None:
            raise Http404("No such action.")
        if not self.has_operate_permission(request):
            raise PermissionDenied
        if request.method != "POST":
            ids = _uuids(request.GET.get("runs", "").replace(",", " ").split())
            return self._confirm(request, action, ImportRun.objects.filter(id__in=ids))
        form = ReasonForm(request.POST)
        if not form.is_valid():
            ids = _uuids(request.POST.get("runs", "").split())
            queryset = ImportRun.objects.filter(id__in=ids)
            return self._confirm(request, action, queryset, form=form)
        runs, _ = runs_for_action(ImportRun.objects.filter(id__in=_uuids(form.run_ids())))
        reason = form.cleaned_data["reason"]
        done = apply(action, runs, actor=Actor.of_operator(request.user), reason=reason)
        for result in done:
            if result.outcome == "changed":
                self.log_change(request, result.run, f"{action.label}: {reason}")
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"{action.label}: what happened",
            "action": action,
            "done": done,
            "changed": [d for d in done if d.outcome == "changed"],
            "left": [d for d in done if d.outcome != "changed"],
            "reason": reason,
        }
        return TemplateResponse(request, "admin/pipeline/importrun/action.html", context)

    def dead_letter_view(self, request):
        """Dead-lettered and failed runs by error code and stage."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        groups = dead_letter_groups()
        for group in groups:
            group["first"] = local_time(group["first_seen"])
            group["last"] = local_time(group["last_seen"])
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Dead letter: runs that need an operator",
            "groups": groups,
            "can_operate": self.has_operate_permission(request),
            "changelist_url": reverse("admin:pipeline_importrun_changelist"),
            "retry_url": reverse("admin:pipeline_importrun_dead_letter_retry"),
        }
        return TemplateResponse(request, "admin/pipeline/importrun/dead_letter.html", context)

    def dead_letter_retry_view(self, request):
        """The confirmation page of 'retry all in this group'."""
        if not self.has_operate_permission(request):
            raise PermissionDenied
        statuses = [s for s in request.GET.getlist("status") if s in ENDED_BADLY] or ENDED_BADLY
        error_code, stage = request.GET.get("error_code", ""), request.GET.get("stage", "")
        queryset = dead_letter_group(error_code=error_code, stage=stage, statuses=statuses)
        group = {"error_code": error_code or "(none)", "stage": stage}
        return self._confirm(request, ACTIONS["retry"], queryset, group=group)


@admin.register(StageAttempt)
class StageAttemptAdmin(FastListAdmin, RecordAdmin):
    list_display = [
        "run_link",
        "organisation_slug",
        "stage",
        "try_number",
        "outcome",
        "error_type",
        "worker",
        "started",
        "duration",
        "cpu_ms",
    ]
    list_filter = ["stage", "outcome", ErrorTypeFilter]
    list_select_related = ["run__organisation"]
    ordering = ["-started_at", "-id"]
    search_fields = ["run__id"]
    search_help_text = "A run id (whole), or an error type exactly."
    started = _time("started_at", "started")
    finished = _time("finished_at", "finished")
    fields = [
        "run",
        ("stage", "generation", "number", "outcome"),
        ("worker", "job_id"),
        ("started", "finished", "duration", "cpu_ms"),
        "error_type",
        "error_message",
        "traceback_text",
    ]
    readonly_fields = [
        "run",
        "stage",
        "generation",
        "number",
        "outcome",
        "worker",
        "job_id",
        "started",
        "finished",
        "duration",
        "cpu_ms",
        "error_type",
        "error_message",
        "traceback_text",
    ]

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if not term:
            return queryset, False
        try:
            return queryset.filter(run_id=uuid.UUID(term)), False
        except ValueError:
            return queryset.filter(error_type=term), False

    @admin.display(description="run", ordering="run_id")
    def run_link(self, attempt):
        url = reverse("admin:pipeline_importrun_change", args=[attempt.run_id])
        return format_html('<a href="{}">{}</a>', url, str(attempt.run_id)[:8])

    @admin.display(description="organisation")
    def organisation_slug(self, attempt):
        return attempt.run.organisation.slug

    @admin.display(description="generation / try")
    def try_number(self, attempt):
        return f"{attempt.generation} / {attempt.number}"

    @admin.display(description="duration")
    def duration(self, attempt):
        ms = attempt.duration_ms
        return "-" if ms is None else f"{ms} ms"

    @admin.display(description="traceback")
    def traceback_text(self, attempt):
        if not attempt.traceback:
            return "-"
        return format_html('<pre class="traceback">{}</pre>', attempt.traceback)


def _attempt_row(attempt: StageAttempt) -> dict:
    return {
        "attempt": attempt,
        "started": local_time(attempt.started_at),
        "finished": local_time(attempt.finished_at),
        "duration": duration(attempt.duration_ms / 1000)
        if attempt.duration_ms is not None
        else "-",
        "url": reverse("admin:pipeline_stageattempt_change", args=[attempt.id]),
    }


def _cut(text: str, length: int) -> str:
    return text if len(text) <= length else text[: length - 1] + "…"


def _uuids(values: list[str]) -> list[uuid.UUID]:
    ids = []
    for value in values[: MAX_RUNS_PER_ACTION + 1]:
        try:
            ids.append(uuid.UUID(value))
        except ValueError:
            continue
    return ids
