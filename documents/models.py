"""Organisations, their members and tokens, documents, their text and chunks, and page quotas.

Nothing here refers to the pipeline: a run points at its reservation, not the
other way round.
"""

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import F, Q

import formats.base


class Organisation(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    page_limit = models.PositiveIntegerField(default=0)
    # The languages OCR reads its scans in, as Tesseract names them joined by "+"
    # ("eng+deu"); empty: the server's PAPERLANE_OCR_LANGUAGES.
    ocr_languages = models.CharField(
        max_length=100,
        blank=True,
        help_text='Languages OCR reads this organisation\'s scans in, such as "eng+deu"; '
        "empty for the server's default (PAPERLANE_OCR_LANGUAGES).",
    )
    # Kept in step with the reservation and ledger rows by the quota services.
    pages_used = models.PositiveIntegerField(default=0)
    pages_reserved = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(pages_used__gte=0) & Q(pages_reserved__gte=0),
                name="organisation_pages_non_negative",
            ),
            models.CheckConstraint(
                condition=Q(pages_used__lte=F("page_limit") - F("pages_reserved")),
                name="organisation_quota_within_limit",
            ),
        ]

    def __str__(self) -> str:
        return self.slug

    @property
    def pages_available(self) -> int:
        return max(self.page_limit - self.pages_used - self.pages_reserved, 0)


class Membership(models.Model):
    class Role(models.TextChoices):
        # What each may do: documents/roles.py.
        VIEWER = "viewer", "Viewer"
        MEMBER = "member", "Member"
        ADMIN = "admin", "Admin"

    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="memberships", db_index=False
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "user"], name="membership_unique_per_org"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.organisation}"


class ApiToken(models.Model):
    """A bearer token for one organisation. Only a SHA-256 of the secret is stored."""

    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    # The first characters of the token, shown in lists so people can tell tokens apart.
    prefix = models.CharField(max_length=16)
    token_hash = models.CharField(max_length=64, unique=True)
    # What the token may do (documents/roles.py), chosen by the operator who made it.
    role = models.CharField(
        max_length=16, choices=Membership.Role.choices, default=Membership.Role.MEMBER
    )
    # Who made it (a person, in the admin; a token cannot make tokens) and who revoked it:
    # a person in the admin, or a token through the API.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Made by an admin of the organisation on the members' tokens page: it acts with no
    # more than the role its maker has there now, and not at all once they left or their
    # account was deleted (documents/services/tokens.py). Tokens operators make for the
    # organisation (the admin, create_api_token) are no member's and keep their role.
    bound_to_maker = models.BooleanField(default=False, verbose_name="acts for its maker")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revoked_by_token = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.organisation})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class DocumentKind(models.TextChoices):
    PDF = formats.base.PDF, "PDF"
    DOCX = formats.base.DOCX, "Word (DOCX)"
    PNG = formats.base.PNG, "PNG picture"
    JPEG = formats.base.JPEG, "JPEG picture"
    TIFF = formats.base.TIFF, "TIFF picture"


class TextEngine(models.TextChoices):
    """What read a document's text."""

    PDFIUM = formats.base.PDFIUM, "PDFium"
    PYPDF = formats.base.PYPDF, "pypdf (a PDF PDFium could not open)"
    WORD_XML = formats.base.WORD_XML, "Word XML"


class Document(models.Model):
    """One logical document of an organisation; its bytes live at `storage_key`."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="documents", db_index=False
    )
    filename = models.CharField(max_length=255)
    kind = models.CharField(max_length=8, choices=DocumentKind.choices)
    size_bytes = models.BigIntegerField()
    sha256 = models.CharField(max_length=64)
    storage_key = models.CharField(max_length=512, unique=True)
    # Bumped when a connector sees new content for the same file; chunks and
    # the usage ledger are keyed by it.
    version = models.PositiveIntegerField(default=1)
    page_count = models.PositiveIntegerField(null=True, blank=True)
    # The version whose chunks search reads: set when a run of it settles (with its
    # charge), cleared when the document leaves search. NULL: nothing is searchable. A
    # newer version's chunks wait, unsearchable, until its own run settles.
    searchable_version = models.PositiveIntegerField(null=True, blank=True)
    # The searchable version's chunks (what search can find), as of its settle.
    chunk_count = models.PositiveIntegerField(default=0)
    text_chars = models.PositiveIntegerField(default=0)
    # Pages of the current version whose text could not be read (numbered from 1): the
    # rest of the document is processed, and these are named to the people who sent it.
    unreadable_pages = models.JSONField(default=list, blank=True)
    # Pages of the current version that were read and hold no text (scans, drawings).
    textless_pages = models.JSONField(default=list, blank=True)
    # The pages of the current version read by OCR: [{"page": n, "confidence": c}, ...]
    # (mean word confidence, 0 to 1), in page order.
    ocr_pages = models.JSONField(default=list, blank=True)
    # What read the current version's text; blank before it is extracted.
    text_engine = models.CharField(max_length=16, choices=TextEngine.choices, blank=True)
    # A connected folder's file this document came from was deleted there.
    source_deleted_at = models.DateTimeField(null=True, blank=True)
    # Deleted by a person or an integration: its content is gone, the row stays for the
    # runs, their history and the usage ledger that point at it.
    deleted_at = models.DateTimeField(null=True, blank=True)
    # Who deleted it, as a run's history names actors ("user:alice", "api-token:pl_ab12").
    deleted_by = models.CharField(max_length=200, blank=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [
            models.Index(fields=["organisation", "-created_at"], name="document_org_recent"),
            # The admin finds a file by its whole SHA-256, across organisations.
            models.Index(fields=["sha256"], name="document_sha256"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(size_bytes__gt=0), name="document_size_positive"),
            models.CheckConstraint(condition=Q(version__gte=1), name="document_version_positive"),
        ]

    def __str__(self) -> str:
        return self.filename


class PendingUpload(models.Model):
    """A direct upload an API client asked for (an S3 presigned PUT) and has not completed.

    The URL writes to the stable key of the document the upload becomes
    (`reserved_document_id`, version 1, the declared kind), so completing it stores
    nothing and copies nothing: it checks the object, then accepts it as any upload is
    accepted. `complete_by` ends it: an upload never completed is then removed with its
    object, and a completed one's row goes (its object is its document's by then).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Indexed by pending_upload_org_expiry, which starts with it.
    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="pending_uploads", db_index=False
    )
    api_token = models.ForeignKey(
        ApiToken, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The id the document gets when the upload is completed; its key is derived from it.
    reserved_document_id = models.UUIDField(unique=True, default=uuid.uuid4, editable=False)
    storage_key = models.CharField(max_length=512, unique=True)
    filename = models.CharField(max_length=255)
    kind = models.CharField(max_length=8, choices=DocumentKind.choices)
    # As signed into the URL: the PUT must send exactly these.
    content_type = models.CharField(max_length=100)
    size_bytes = models.BigIntegerField()
    # When the URL stops taking the PUT, and when the upload can no longer be completed.
    expires_at = models.DateTimeField()
    complete_by = models.DateTimeField()
    # Set together, in the transaction that accepts the document.
    document = models.OneToOneField(
        Document,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="pending_upload",
    )
    completed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            # An organisation's uploads still open (its bound), and the sweeper's expired ones.
            models.Index(fields=["organisation", "complete_by"], name="pending_upload_org_expiry"),
            models.Index(fields=["complete_by"], name="pending_upload_expiry"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(size_bytes__gt=0), name="pending_upload_size_positive"
            ),
            models.CheckConstraint(
                condition=Q(document__isnull=True, completed_at__isnull=True)
                | Q(document__isnull=False, completed_at__isnull=False),
                name="pending_upload_completed_with_document",
            ),
        ]

    def __str__(self) -> str:
        return f"upload {self.filename} ({self.organisation})"

    @property
    def is_completed(self) -> bool:
        return self.completed_at is not None


# The bytes of each number of a Chunk's embedding (little-endian float32).
FLOAT32_BYTES = 4


class Chunk(models.Model):
    """A piece of a document's text with its embedding.

    The primary key is derived from (document, version, index), so re-running
    the embed stage overwrites rows instead of adding new ones.
    """

    id = models.UUIDField(primary_key=True, editable=False)
    document = models.ForeignKey(
        Document, on_delete=models.CASCADE, related_name="chunks", db_index=False
    )
    version = models.PositiveIntegerField()
    index = models.PositiveIntegerField()
    text = models.TextField()
    # What the search index reads where it is not `text`: `text` with each run of Chinese,
    # Japanese or Korean characters as its pairs (core/cjk.py); null for any other text
    # (the generated `search_vector` reads coalesce(search_text, text)).
    search_text = models.TextField(null=True, blank=True)  # noqa: DJ001
    # float32 little-endian (FLOAT32_BYTES a number): the record of the vector, read by the
    # exact scan where PostgreSQL has no pgvector (retrieval/vectors.py).
    embedding = models.BinaryField()
    embedding_model = models.CharField(max_length=100)
    # How many numbers the embedding holds (search never compares vectors of two models).
    embedding_dimensions = models.PositiveIntegerField(null=True)
    # The pages the chunk's text comes from (1-based, inclusive), when the format has pages.
    page_start = models.PositiveIntegerField(null=True)
    page_end = models.PositiveIntegerField(null=True)
    # The title of the section the chunk starts in (a PDF's outline, a Word heading).
    section = models.CharField(max_length=300, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["document", "version", "index"], name="chunk_unique_position"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.document_id} v{self.version} #{self.index}"

    @staticmethod
    def stable_id(*, document_id: uuid.UUID, version: int, index: int) -> uuid.UUID:
        return uuid.uuid5(document_id, f"v{version}/chunk/{index}")


class SearchWord(models.Model):
    """A word the organisation's searchable documents hold, and in how many of them: the
    vocabulary that search's "Did you mean" suggests from (retrieval/suggest.py), kept by
    documents/services/vocabulary.py as versions become searchable and leave search.

    Found by its spelling with one letter dropped too: a GIN index on
    `paperlane_word_deletes(word)` (migration 0022), so that a word typed with a letter
    changed, added, dropped or two swapped finds it.
    """

    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    word = models.CharField(max_length=32)
    # Searchable documents holding it; the row goes when none does. Below 0 for a moment
    # where a document's leaving was counted before its coming (two sweepers at once).
    documents = models.IntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organisation", "word"], name="search_word_once"),
        ]

    def __str__(self) -> str:
        return f"{self.word} ({self.documents})"


class VocabularyChange(models.Model):
    """The words one document's version brought into search and those its leaving took
    out, written in the transaction that changed what is searchable, and added to the
    organisation's `SearchWord` counts by the sweeper, many changes in one statement
    (documents/services/vocabulary.py)."""

    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    added = ArrayField(models.CharField(max_length=32))
    removed = ArrayField(models.CharField(max_length=32))

    def __str__(self) -> str:
        return f"+{len(self.added)} -{len(self.removed)} words"


class QuotaReservation(models.Model):
    """Pages held for one piece of work (an import run) until it settles (charged) or
    ends (released)."""

    class Status(models.TextChoices):
        HELD = "held", "Held"
        SETTLED = "settled", "Settled"
        RELEASED = "released", "Released"

    organisation = models.ForeignKey(
        Organisation, on_delete=models.CASCADE, related_name="reservations", db_index=False
    )
    pages = models.PositiveIntegerField()
    # True when the page count is a guess (DOCX before extraction).
    estimated = models.BooleanField(default=False)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.HELD)
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["organisation", "status"], name="reservation_org_status")]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["held", "settled", "released"]),
                name="reservation_status_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.pages} pages {self.status}"


class UsageEntry(models.Model):
    """The page ledger: one row per organisation and document version, never two."""

    organisation = models.ForeignKey(
        Organisation, on_delete=models.PROTECT, related_name="usage", db_index=False
    )
    document = models.ForeignKey(Document, on_delete=models.PROTECT, related_name="usage")
    document_version = models.PositiveIntegerField()
    pages = models.PositiveIntegerField()
    # The reservation this charge settled.
    reservation = models.ForeignKey(
        QuotaReservation, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "usage entries"
        constraints = [
            models.UniqueConstraint(
                fields=["organisation", "document", "document_version"],
                name="usage_once_per_document_version",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.pages} pages for {self.document_id} v{self.document_version}"


class PageReading(models.Model):
    """A page of one document version that held no text, as OCR read it: its text and how
    sure the engine was (mean word confidence, 0 to 1), or why it could not be read. One
    row a page, written as each page is read, so a stage that stopped goes on after the
    last page it finished and no page is read twice for a version."""

    document = models.ForeignKey(
        Document, on_delete=models.CASCADE, related_name="page_readings", db_index=False
    )
    version = models.PositiveIntegerField()
    page = models.PositiveIntegerField()  # from 1
    text = models.TextField(blank=True)
    confidence = models.FloatField(default=0.0)
    # Why the page could not be read ("" when it was).
    problem = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["document", "version", "page"], name="page_read_once_per_version"
            ),
        ]

    def __str__(self) -> str:
        return f"page {self.page} of {self.document_id} v{self.version}"


class DocumentText(models.Model):
    """The extracted text of one document version, kept apart from the document row."""

    document = models.ForeignKey(
        Document, on_delete=models.CASCADE, related_name="texts", db_index=False
    )
    version = models.PositiveIntegerField()
    text = models.TextField()
    page_count = models.PositiveIntegerField()
    # Where each page's text starts in `text` (offsets), when the format has pages.
    page_starts = models.JSONField(default=list, blank=True)
    # The document's outline: a PDF's bookmarks [{"title", "level", "page"}, ...], a Word
    # document's headings [{"title", "level", "offset"}, ...] (offsets into `text`).
    outline = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["document", "version"], name="text_once_per_version"),
        ]

    def __str__(self) -> str:
        return f"text of {self.document_id} v{self.version}"
