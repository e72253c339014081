"""Import runs, their stage attempts and their transition history."""

import uuid

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils import timezone


class Stage(models.TextChoices):
    CREATE = "create", "Create"
    STORE = "store", "Store"
    EXTRACT = "extract", "Extract"
    OCR = "ocr", "OCR"
    EMBED = "embed", "Embed"
    SETTLE = "settle", "Settle"


class RunStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    PROCESSING = "processing", "Processing"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    DEAD_LETTER = "dead_letter", "Dead letter"
    CANCELLED = "cancelled", "Cancelled"


TERMINAL_STATUSES = (
    RunStatus.SUCCEEDED,
    RunStatus.FAILED,
    RunStatus.DEAD_LETTER,
    RunStatus.CANCELLED,
)
ACTIVE_STATUSES = (RunStatus.QUEUED, RunStatus.PROCESSING)
# The ended runs a retry may start again.
RETRYABLE_STATUSES = (RunStatus.FAILED, RunStatus.DEAD_LETTER, RunStatus.CANCELLED)


class RunSource(models.TextChoices):
    WEB = "web", "Web upload"
    API = "api", "API"
    CONNECTOR = "connector", "Connector"


class RunPriority(models.TextChoices):
    INTERACTIVE = "interactive", "Interactive"
    BULK = "bulk", "Bulk"


class ImportRun(models.Model):
    """One attempt to bring a document through the pipeline.

    `stage` is the stage that is due (status queued/processing) or the one the
    run ended in. A worker holds the stage while `lease_expires_at` is in the
    future; an expired lease means the worker died and the stage is due again.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index of its own: the indexes that start with it (recent runs, idempotency keys,
    # admission) serve its lookups, and each index costs every claim and completion.
    organisation = models.ForeignKey(
        "documents.Organisation", on_delete=models.CASCADE, related_name="runs", db_index=False
    )
    # Uploads create the document at accept; connector imports create it in
    # the `create` stage.
    document = models.ForeignKey(
        "documents.Document", null=True, blank=True, on_delete=models.CASCADE, related_name="runs"
    )
    # The pages held for this run until it settles or ends.
    reservation = models.OneToOneField(
        "documents.QuotaReservation", on_delete=models.RESTRICT, related_name="run"
    )
    source = models.CharField(max_length=16, choices=RunSource.choices)
    priority = models.CharField(
        max_length=16, choices=RunPriority.choices, default=RunPriority.INTERACTIVE
    )
    # NULL, not "", when absent: the unique constraint ignores NULLs.
    idempotency_key = models.CharField(max_length=255, null=True, blank=True)  # noqa: DJ001
    # SHA-256 of the uploaded bytes: a replayed Idempotency-Key must send the same file.
    request_sha256 = models.CharField(max_length=64, blank=True)

    status = models.CharField(max_length=16, choices=RunStatus.choices, default=RunStatus.QUEUED)
    stage = models.CharField(max_length=16, choices=Stage.choices, default=Stage.CREATE)
    due_at = models.DateTimeField(null=True, blank=True)
    # Tries of the current stage since it became due (the retry budget), and of
    # every stage over the run's life.
    stage_attempts = models.PositiveIntegerField(default=0)
    total_attempts = models.PositiveIntegerField(default=0)
    # Those of the stage's tries that failed while its provider was in an outage: not
    # counted against the retry budget (`stage_attempts` still numbers every try, so each
    # delivery keeps a job id of its own). A database default too, for rows written in SQL.
    provider_waits = models.PositiveIntegerField(default=0, db_default=0)
    # Bumped when an operator retries an ended run, so its deliveries get new job ids.
    generation = models.PositiveIntegerField(default=0)
    # Attempts of the current stage in a row whose worker died; poison detection.
    crashes = models.PositiveIntegerField(default=0)
    lease_owner = models.CharField(max_length=200, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    # When the run last changed stage or status: "time in the current stage" in the admin.
    # Set by the run services with every such change (accept, claim, complete, fail, ...).
    stage_entered_at = models.DateTimeField(default=timezone.now)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    error_code = models.CharField(max_length=64, blank=True)
    error_message = models.TextField(blank=True)

    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    api_token = models.ForeignKey(
        "documents.ApiToken", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        # The tables keep the name of the app they were made by (`jobs`).
        db_table = "jobs_importrun"
        indexes = [
            models.Index(fields=["status", "due_at"], name="run_status_due"),
            models.Index(fields=["organisation", "-created_at"], name="run_org_recent"),
            # The admin's list: newest first, alone or within a status, stage or error
            # code (the last also lists the error codes, skipping through the index).
            models.Index(fields=["created_at", "id"], name="run_recent"),
            models.Index(fields=["status", "created_at", "id"], name="run_status_recent"),
            models.Index(fields=["stage", "created_at", "id"], name="run_stage_recent"),
            models.Index(fields=["error_code", "created_at", "id"], name="run_error_recent"),
            # "Longest in its stage" first (changes only with stage or status, as the above).
            models.Index(fields=["stage_entered_at"], name="run_stage_entered"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "idempotency_key"],
                condition=Q(idempotency_key__isnull=False),
                name="run_idempotency_key_unique",
            ),
            models.CheckConstraint(
                condition=Q(status__in=RunStatus.values), name="run_status_valid"
            ),
            models.CheckConstraint(condition=Q(stage__in=Stage.values), name="run_stage_valid"),
            models.CheckConstraint(
                condition=Q(progress_done__lte=F("progress_total")), name="run_progress_bounded"
            ),
            models.CheckConstraint(
                condition=Q(source=RunSource.CONNECTOR) | Q(document__isnull=False),
                name="run_upload_has_document",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.id} ({self.status}/{self.stage})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


class StageAttempt(models.Model):
    """One try of one stage of a run, by one worker."""

    class Outcome(models.TextChoices):
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        TRANSIENT_ERROR = "transient_error", "Transient error"
        PERMANENT_ERROR = "permanent_error", "Permanent error"
        TIMEOUT = "timeout", "Timed out"
        ABANDONED = "abandoned", "Abandoned (worker died)"
        SKIPPED = "skipped", "Skipped (run changed meanwhile)"
        # The worker found, at its next step, that the run had ended meanwhile (cancelled,
        # dead-lettered by an operator, its document deleted) and stopped there.
        STOPPED = "stopped", "Stopped (the run ended meanwhile)"
        # The worker stopped answering for longer than its lease, the stage was taken
        # back, and it came back and stopped at its next step.
        LEASE_LOST = "lease_lost", "Lease lost (stage taken back meanwhile)"

    # Indexed by attempt_unique_number, which starts with it.
    run = models.ForeignKey(
        ImportRun, on_delete=models.CASCADE, related_name="attempts_log", db_index=False
    )
    stage = models.CharField(max_length=16, choices=Stage.choices)
    # The run's generation (bumped by an operator's retry) and the try within it.
    generation = models.PositiveIntegerField(default=0)
    number = models.PositiveIntegerField()
    job_id = models.CharField(max_length=200, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=20, choices=Outcome.choices, default=Outcome.RUNNING)
    # CPU time the stage body used (its thread, and the isolated children it waited for,
    # e.g. the extraction's), to tell work from waiting.
    cpu_ms = models.PositiveIntegerField(null=True, blank=True)
    # What went wrong, as the run's error code says it (e.g. "damaged_pdf", "timeout",
    # "worker_lost"), and the class of the exception raised, e.g. "pypdf.errors.PdfReadError".
    error_code = models.CharField(max_length=64, blank=True)
    error_type = models.CharField(max_length=200, blank=True)
    error_message = models.TextField(blank=True)
    traceback = models.TextField(blank=True)

    class Meta:
        db_table = "jobs_stageattempt"
        ordering = ["started_at", "id"]
        indexes = [
            # The admin's attempts list: newest first, alone or by outcome or error type.
            models.Index(fields=["started_at", "id"], name="attempt_recent"),
            models.Index(fields=["outcome", "started_at", "id"], name="attempt_outcome_recent"),
            models.Index(fields=["error_type", "started_at", "id"], name="attempt_error_recent"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "generation", "stage", "number"], name="attempt_unique_number"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.stage} #{self.number} of run {self.run_id}: {self.outcome}"

    @property
    def duration_ms(self) -> int | None:
        if self.finished_at is None:
            return None
        return int((self.finished_at - self.started_at).total_seconds() * 1000)


class RunTransition(models.Model):
    """The history of a run: every status or stage change, who made it and why."""

    # Indexed by transition_run_time, which starts with it.
    run = models.ForeignKey(
        ImportRun, on_delete=models.CASCADE, related_name="transitions", db_index=False
    )
    from_status = models.CharField(max_length=16, blank=True)
    to_status = models.CharField(max_length=16)
    from_stage = models.CharField(max_length=16, blank=True)
    to_stage = models.CharField(max_length=16)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # "api-token:ab12cd34", "worker:host.123", "sweeper", "user:alice".
    actor_label = models.CharField(max_length=200)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "jobs_runtransition"
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["run", "created_at"], name="transition_run_time")]

    def __str__(self) -> str:
        return f"{self.from_status or '-'} -> {self.to_status} ({self.actor_label})"
