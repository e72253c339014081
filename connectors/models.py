"""Connected folders: each connection, the files it recorded (one row per file version), its
syncs and the folders it saw. A connector's run is the pipeline's; an import points at it.

The tables keep the names they were made with when these models lived in `documents`.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from connectors.problems import Problem, problem_text
from documents.models import Document, Organisation


class Connection(models.Model):
    """A folder of an organisation that its documents flow in from (OneDrive, a local folder).

    The sync lists the folder's changes from `cursor` on, records each file as a
    ConnectorImport and saves the cursor only after a page's imports are recorded.
    """

    class Provider(models.TextChoices):
        ONEDRIVE = "onedrive", "OneDrive"
        LOCAL = "local", "Local folder"

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        PAUSED = "paused", "Paused"
        NEEDS_RECONNECT = "needs_reconnect", "Needs reconnect"
        ERROR = "error", "Error"
        # A person disconnected it: no tokens kept, no syncs; its documents stay.
        DISCONNECTED = "disconnected", "Disconnected"

    class Result(models.TextChoices):
        OK = "ok", "OK"
        BUSY = "busy", "Provider busy"
        FAILED = "failed", "Failed"
        NEEDS_RECONNECT = "needs_reconnect", "Needs reconnect"

    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="connections"
    )
    provider = models.CharField(max_length=16, choices=Provider.choices)
    # Where the folder is for the provider: an absolute path (local) or the remote folder's id.
    folder_id = models.CharField(max_length=1024)
    # Where it is for people ("/Documents/Contracts", "/srv/scans").
    folder_path = models.CharField(max_length=1024)
    # Fernet token of the provider's credentials (JSON); see core/secrets.py.
    credentials_encrypted = models.TextField(blank=True)
    # Provider state that is not secret (e.g. a change-notification subscription's id and expiry).
    provider_state = models.JSONField(default=dict, blank=True)
    # Where the next listing starts (a Graph delta link; a local folder's last poll).
    cursor = models.TextField(blank=True)
    # Set when an enumeration restarted from nothing: imports not seen since are deleted.
    reconcile_since = models.DateTimeField(null=True, blank=True)

    status = models.CharField(max_length=20, choices=Status.choices, default=Status.ACTIVE)
    status_reason = models.TextField(blank=True)
    last_sync_at = models.DateTimeField(null=True, blank=True)
    last_sync_result = models.CharField(max_length=20, choices=Result.choices, blank=True)
    # The last sync's problem: technical (operators) and its kind (members read it plainly).
    last_error = models.TextField(blank=True)
    last_problem = models.CharField(max_length=32, choices=Problem.CHOICES, blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    files_seen = models.PositiveIntegerField(default=0)
    files_imported = models.PositiveIntegerField(default=0)
    files_skipped = models.PositiveIntegerField(default=0)
    files_failed = models.PositiveIntegerField(default=0)
    next_sync_at = models.DateTimeField(null=True, blank=True)
    # "Sync now" and change notifications set it; a sync that starts after it clears it.
    sync_requested_at = models.DateTimeField(null=True, blank=True)
    # Whoever syncs holds this lease (a conditional UPDATE takes it): one sync at a time.
    sync_owner = models.CharField(max_length=200, blank=True)
    sync_lease_until = models.DateTimeField(null=True, blank=True)

    # Who connected it last: a OneDrive connection reads with their sign-in, and pauses
    # when they leave the organisation.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "documents_connection"
        indexes = [models.Index(fields=["status", "next_sync_at"], name="connection_due")]
        constraints = [
            models.CheckConstraint(
                condition=Q(provider__in=["onedrive", "local"]), name="connection_provider_valid"
            ),
            models.CheckConstraint(
                condition=Q(
                    status__in=["active", "paused", "needs_reconnect", "error", "disconnected"]
                ),
                name="connection_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_provider_display()} {self.folder_path} ({self.organisation})"

    @property
    def problem_text(self) -> str:
        """The last sync's problem as members read it ("" if it had none)."""
        if not (self.last_problem or self.last_error):
            return ""
        return problem_text(self.last_problem, provider=self.get_provider_display())


class ConnectorImport(models.Model):
    """One version of one file of a connection, recorded once under its import key.

    The key (organisation, connection, file id, content version) is unique in the
    database, so a repeated page, notification or sync never records a file
    version twice; the run that imports it points back here (`run`).
    """

    class State(models.TextChoices):
        # A run is importing it.
        QUEUED = "queued", "Importing"
        IMPORTED = "imported", "Imported"
        SKIPPED = "skipped", "Skipped"
        FAILED = "failed", "Failed"
        DELETED = "deleted", "Deleted at the source"
        # Its bytes are those of a live document of the organisation (`duplicate_of`): not
        # imported or charged again.
        DUPLICATE = "duplicate", "Duplicate"

    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="connector_imports", db_index=False
    )
    connection = models.ForeignKey(
        Connection, on_delete=models.CASCADE, related_name="imports", db_index=False
    )
    file_id = models.CharField(max_length=1024)
    content_version = models.CharField(max_length=255)
    name = models.CharField(max_length=255)
    path = models.CharField(max_length=2048)
    size_bytes = models.BigIntegerField(null=True, blank=True)
    # Set by the create stage (the same document for every version of one file) and,
    # once the bytes are stored, the document version they became.
    document = models.ForeignKey(
        Document,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="connector_imports",
    )
    document_version = models.PositiveIntegerField(null=True, blank=True)
    # The document that has this version's bytes already, when it is a duplicate. Read
    # from the import, never looked up from the document: no index of its own.
    duplicate_of = models.ForeignKey(
        Document,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    # The run that imports this version, made with it by the sync (the pipeline's runs know
    # nothing of connectors: the link is kept here).
    run = models.OneToOneField(
        "pipeline.ImportRun",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="connector_import",
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    # Why it was skipped or failed, for people.
    reason = models.TextField(blank=True)
    # When a listing last saw this file at this version (reconciling a restarted listing).
    seen_at = models.DateTimeField(default=timezone.now)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "documents_connectorimport"
        indexes = [
            models.Index(fields=["connection", "file_id"], name="import_connection_file"),
            models.Index(fields=["connection", "state", "-created_at"], name="import_state"),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "connection", "file_id", "content_version"],
                name="import_key_unique",
            ),
            models.CheckConstraint(
                condition=Q(
                    state__in=["queued", "imported", "skipped", "failed", "deleted", "duplicate"]
                ),
                name="import_state_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.path} @ {self.content_version}"


class ConnectionSync(models.Model):
    """One sync of a connection: when, what it found and how it ended."""

    connection = models.ForeignKey(
        Connection, on_delete=models.CASCADE, related_name="syncs", db_index=False
    )
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Empty while it runs; then one of Connection.Result.
    result = models.CharField(max_length=20, blank=True)
    files_seen = models.PositiveIntegerField(default=0)
    # New runs started, files skipped (unsupported), files recorded deleted.
    imports_started = models.PositiveIntegerField(default=0)
    files_skipped = models.PositiveIntegerField(default=0)
    files_deleted = models.PositiveIntegerField(default=0)
    # What went wrong, for operators; its kind is what members are told (problem_text).
    error = models.TextField(blank=True)
    problem = models.CharField(max_length=32, choices=Problem.CHOICES, blank=True)

    class Meta:
        db_table = "documents_connectionsync"
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["connection", "-started_at"], name="sync_recent")]

    def __str__(self) -> str:
        return f"sync of {self.connection_id} at {self.started_at:%Y-%m-%d %H:%M:%S}"

    @property
    def problem_text(self) -> str:
        """What went wrong as members read it ("" if nothing did)."""
        if not (self.problem or self.error):
            return ""
        provider = Connection.Provider(self.connection.provider).label
        return problem_text(self.problem, provider=provider)


class ConnectionFolder(models.Model):
    """A folder in a connection's folder (or the connected folder itself) as the sync last
    recorded it: where it was and what it was called.

    Microsoft Graph's delta reports a moved or renamed folder alone, not what is under
    it, so a later sync tells what moved (in, out, within) by comparing with these.
    Written in the same transaction as the imports of the page it came from.
    """

    connection = models.ForeignKey(
        Connection, on_delete=models.CASCADE, related_name="folders", db_index=False
    )
    # The provider's ids (Graph item ids); the connected folder's parent is outside it.
    item_id = models.CharField(max_length=1024)
    parent_id = models.CharField(max_length=1024, blank=True)
    name = models.CharField(max_length=1024)
    # When a listing last saw it (a restarted listing forgets the folders it did not see).
    seen_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "documents_connectionfolder"
        indexes = [
            models.Index(fields=["connection", "parent_id"], name="connection_folder_parent")
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["connection", "item_id"], name="connection_folder_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.item_id}) in {self.connection_id}"


class ConnectionEvent(models.Model):
    """One change made to a connection (connected, paused, resumed, disconnected, or its
    status changed by a sync): who or what, when, the status before and after, and why.
    The connection's history on its page and its audit trail in the admin."""

    class Action(models.TextChoices):
        CONNECTED = "connected", "Connected"
        RECONNECTED = "reconnected", "Connected again"
        PAUSED = "paused", "Paused"
        RESUMED = "resumed", "Resumed"
        DISCONNECTED = "disconnected", "Disconnected"
        SYNC = "sync", "Changed by a sync"

    connection = models.ForeignKey(
        Connection, on_delete=models.CASCADE, related_name="events", db_index=False
    )
    at = models.DateTimeField(default=timezone.now)
    # As a run's history names actors: "user:alice", "connector:local:7", "system".
    actor = models.CharField(max_length=200)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    action = models.CharField(max_length=20, choices=Action.choices)
    status_before = models.CharField(max_length=20, blank=True)
    status_after = models.CharField(max_length=20)
    reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["connection", "-at"], name="connection_event_recent")]

    def __str__(self) -> str:
        return f"{self.get_action_display()} by {self.actor} at {self.at:%Y-%m-%d %H:%M:%S}"

    @property
    def status_change(self) -> str:
        """ "Active → Paused", as people read statuses."""
        before = Connection.Status(self.status_before).label if self.status_before else "new"
        return f"{before} → {Connection.Status(self.status_after).label}"
