from django.contrib import admin

from documents.admin import RecordAdmin
from jobs.models import ImportRun, RunTransition, StageAttempt


class StageAttemptInline(admin.TabularInline):
    model = StageAttempt
    extra = 0
    can_delete = False
    fields = [
        "stage",
        "number",
        "outcome",
        "worker",
        "started_at",
        "finished_at",
        "error_type",
        "error_message",
    ]
    readonly_fields = fields


class RunTransitionInline(admin.TabularInline):
    model = RunTransition
    extra = 0
    can_delete = False
    fields = ["created_at", "from_status", "to_status", "to_stage", "actor_label", "reason"]
    readonly_fields = fields


@admin.register(ImportRun)
class ImportRunAdmin(RecordAdmin):
    list_display = [
        "id",
        "organisation",
        "document",
        "status",
        "stage",
        "stage_attempts",
        "total_attempts",
        "created_at",
    ]
    list_filter = ["status", "stage", "source", "organisation"]
    search_fields = ["id", "document__filename", "error_message"]
    readonly_fields = [f.name for f in ImportRun._meta.fields]
    inlines = [StageAttemptInline, RunTransitionInline]


@admin.register(StageAttempt)
class StageAttemptAdmin(RecordAdmin):
    list_display = ["run", "stage", "number", "outcome", "worker", "started_at", "finished_at"]
    list_filter = ["stage", "outcome"]
    readonly_fields = [f.name for f in StageAttempt._meta.fields]
