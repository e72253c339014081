import uuid
from datetime import datetime
from enum import StrEnum
from typing import Literal

from django.conf import settings
from ninja import Schema
from pydantic import ConfigDict, Field

from api.errors import ErrorCode, OrganisationRole
from connectors.models import Connection
from documents.models import DocumentKind, TextEngine
from pipeline.models import RunSource, RunStatus, Stage
from pipeline.services.accept import MAX_FILENAME_LENGTH

# What core/client_text.py refuses in any string, as a schema says it (linear: pydantic's
# patterns never backtrack).
NO_CONTROL_CHARACTERS = r"^[^\x00-\x08\x0b\x0c\x0e-\x1f]*$"


class AcceptOut(Schema):
    """An accepted document: follow its run at `status_url` (or `GET /runs/{run_id}`)."""

    run_id: uuid.UUID
    document_id: uuid.UUID
    # `queued` when new; a replayed Idempotency-Key answers the run's status now.
    status: RunStatus
    # The run, relative to this server.
    status_url: str = Field(json_schema_extra={"format": "uri-reference"})
    # The name the document is stored under: the one sent, with `.pdf` or `.docx` added
    # when its extension does not say what the file is.
    filename: str
    # The `200` of bytes the organisation already has: the id of its live document that
    # has them (also `document_id`; `run_id` is that document's latest run). Nothing new
    # was made or charged. `null` in a `202`.
    duplicate_of: uuid.UUID | None


class UploadIn(Schema):
    """A file to be PUT straight to storage: its name, its exact size and, optionally, its
    type (application/pdf or the .docx type; otherwise the name's extension says)."""

    # Nothing but these three: a misspelt field is a 422, not ignored.
    model_config = ConfigDict(extra="forbid")

    filename: str = Field(
        min_length=1,
        max_length=MAX_FILENAME_LENGTH,
        pattern=NO_CONTROL_CHARACTERS,
    )
    size_bytes: int = Field(ge=0, le=2**53)
    content_type: str | None = Field(None, max_length=255, pattern=NO_CONTROL_CHARACTERS)


class UploadMethod(StrEnum):
    PUT = "PUT"


class UploadOut(Schema):
    upload_id: uuid.UUID
    # PUT the file's bytes to `url` with exactly `headers`, before `expires_at`; then
    # POST to `complete_url`, at the latest by `complete_by`.
    url: str
    method: UploadMethod
    headers: dict[str, str]
    expires_at: datetime
    complete_by: datetime
    complete_url: str = Field(json_schema_extra={"format": "uri-reference"})


# Where a connection reads from, named for the generated clients; Connection.Provider's values.
ConnectorProvider = StrEnum("ConnectorProvider", {p.name: p.value for p in Connection.Provider})


class ConnectorSourceOut(Schema):
    """Where a connector's file came from."""

    connection_id: int
    provider: ConnectorProvider
    # The file's path under the connected folder, and the folder.
    path: str
    folder: str
    content_version: str


class OcrPageOut(Schema):
    page: int
    confidence: float


class DocumentOut(Schema):
    id: uuid.UUID
    filename: str
    kind: DocumentKind
    size_bytes: int
    version: int
    # Counted from the document once its text is extracted; null before.
    page_count: int | None
    chunk_count: int
    # Pages whose text could not be read (damaged); the rest was processed.
    unreadable_pages: list[int]
    # Pages that hold no text layer (scans, images) and that OCR did not read (it found
    # nothing on them, or it is not available on this server): nothing to search on them.
    textless_pages: list[int]
    # Pages without a text layer that OCR read, each with its mean word confidence (0 to 1).
    ocr_pages: list[OcrPageOut]
    # What read the text (a PDF that PDFium cannot open is read by pypdf); null before.
    text_engine: TextEngine | None
    created_at: datetime
    updated_at: datetime
    # The document's newest run and its status (null only for a document with no run).
    latest_run_id: uuid.UUID | None
    status: RunStatus | None
    # Set for a document from a connected folder; `deleted_at_source` once its file is gone.
    connector: ConnectorSourceOut | None
    deleted_at_source: datetime | None


class DocumentPage(Schema):
    items: list[DocumentOut]
    count: int
    limit: int
    offset: int


class ProgressUnit(StrEnum):
    PAGES = "pages"
    CHUNKS = "chunks"


class ProgressOut(Schema):
    """How far the stage a run is in has come: pages read (extract), chunks embedded
    (embed)."""

    done: int = Field(ge=0)
    total: int = Field(ge=0)
    unit: ProgressUnit


class RunErrorOut(Schema):
    """Why the run stopped: `message` is written for the uploader."""

    code: ErrorCode
    message: str


class RunOut(Schema):
    """One pass of a document through the pipeline. It ends `succeeded`, `failed`,
    `dead_letter` or `cancelled`; until then it is `queued` or `processing`."""

    id: uuid.UUID
    status: RunStatus
    # The stage that is due or running, or the one the run ended in.
    stage: Stage
    # How far the stage that counts its work has come (extract: pages, embed: chunks),
    # or got, for a run that stopped in it; null for the other stages.
    progress: ProgressOut | None
    # Every stage attempt the run has made, and those of the stage it is in now (null
    # once it has succeeded).
    attempts: int
    stage_attempts: int | None
    error: RunErrorOut | None
    document_id: uuid.UUID | None
    # What was made of the document: its pages, once counted, and its chunks.
    page_count: int | None
    chunk_count: int
    # The document's pages whose text could not be read; the rest was processed.
    unreadable_pages: list[int]
    # Its pages without a text layer, and what read its text (null before extract).
    textless_pages: list[int]
    text_engine: TextEngine | None
    created_at: datetime
    updated_at: datetime
    # `connector` says which connected file, for a run of one.
    source: RunSource
    connector: ConnectorSourceOut | None


class SearchHitOut(Schema):
    document_id: uuid.UUID
    filename: str
    pages: int | None
    # The chunk that matched best, and its text around the first word of the query it holds.
    chunk_index: int
    snippet: str
    score: float = Field(
        ge=0,
        le=1,
        description="How well it matches, 0 to 1, on its own (not its place): the better of "
        "its words (four fifths the share of the query's clauses its document holds, one "
        "fifth the share its passage holds, weighed by its text score against the best "
        "passage's) and its meaning (the passage's similarity to the query from the "
        "model's floor, 0, to 1). With `document`: the share of the clauses the passage "
        "holds.",
    )
    # The pages the chunk comes from (1-based); null where the format has no pages.
    page_start: int | None
    page_end: int | None
    # The title of the section the chunk starts in; "" where the document has none.
    section: str
    # Where the snippet holds the query's words: [start, end) character offsets.
    marks: list[tuple[int, int]]
    # The page that holds the snippet's first marked word (the chunk may span pages);
    # null where the format has no pages.
    page: int | None
    # Across documents: how many of the document's passages hold every word (search it
    # alone with `document` to have each). 0 in a search of one document.
    passages: int


class Ranking(StrEnum):
    EMBEDDING = "embedding"
    TEXT = "text"


class PassageOrder(StrEnum):
    RANK = "rank"
    PAGE = "page"


class SearchOut(Schema):
    results: list[SearchHitOut]
    # With `document`: how many of its passages hold the words, every page of them; null
    # in a search across documents.
    total: int | None
    # "embedding" when the query's embedding ranked too, "text" when the words alone did
    # (the embedder's vectors have no meaning, or the provider could not embed the query).
    ranking: Ranking
    # Whether more documents match: ask again with `offset` raised by `limit`.
    more: bool
    # Whether the chunks nearest the query's meaning joined those its words found: false
    # when the embedder's vectors do not rank, the provider could not embed the query, or
    # the organisation has more chunks than an exact scan reads and no vector index.
    neighbours: bool
    # During a re-embed: the share (0 to 1) of the organisation's chunks on the current
    # model, the only ones compared with the query's embedding; null otherwise.
    model_share: float | None
    # Whether the query's embedding was to rank but the provider could not make it (down,
    # or paused after failing): the words alone ranked.
    embedding_unavailable: bool
    # "Did you mean": `q` with the words no document of the organisation holds replaced
    # by the nearest words some do (a letter changed, added, dropped, or two swapped);
    # null when every word is held or none is near. Search it as `q` to follow it.
    suggestion: str | None


class QuotaOut(Schema):
    page_limit: int
    pages_used: int
    pages_reserved: int
    pages_available: int


class TokenOut(Schema):
    """An API token as its organisation sees it: never its secret or its hash."""

    id: int
    name: str
    role: OrganisationRole
    # The token's first characters, to tell tokens apart (`pl_AbC123…`).
    prefix: str
    created_at: datetime
    # Written at most once a minute per token (documents/services/tokens.py).
    last_used_at: datetime | None
    revoked_at: datetime | None
    active: bool
    # The token this request was made with.
    current: bool


class TokenPage(Schema):
    items: list[TokenOut]
    count: int
    limit: int
    offset: int


class WebhookEventType(StrEnum):
    """The events an endpoint may ask for (webhook.test is sent on request only)."""

    RUN_SUCCEEDED = "run.succeeded"
    RUN_FAILED = "run.failed"
    RUN_DEAD_LETTER = "run.dead_letter"
    RUN_CANCELLED = "run.cancelled"
    DOCUMENT_DELETED = "document.deleted"
    CONNECTION_PAUSED = "connection.paused"


# An endpoint's URL: https:// (or http:// where the operator allows networks of their own:
# webhooks/services.py), a host without a user name or password, then anything.
WEBHOOK_URL = (
    r"^[hH][tT][tT][pP][sS]?://[^/?#@\x00-\x20\x7f-\x9f]+([/?#][^\x00-\x20\x7f-\x9f]*)?$"
    if settings.PAPERLANE_WEBHOOK_ALLOWED_NETWORKS
    else r"^[hH][tT][tT][pP][sS]://[^/?#@\x00-\x20\x7f-\x9f]+([/?#][^\x00-\x20\x7f-\x9f]*)?$"
)


class WebhookEndpointIn(Schema):
    """A new endpoint: where to send, which events, and a note for people."""

    model_config = ConfigDict(extra="forbid")

    url: str = Field(min_length=1, max_length=2000, pattern=WEBHOOK_URL)
    events: list[WebhookEventType] = Field(min_length=1, max_length=len(WebhookEventType))
    description: str = Field("", max_length=200, pattern=NO_CONTROL_CHARACTERS)


class WebhookEndpointChange(Schema):
    """What to change of an endpoint; what is left out stays. `enabled: true` enables a
    disabled endpoint again (its failures forgotten)."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(None, min_length=1, max_length=2000, pattern=WEBHOOK_URL)
    events: list[WebhookEventType] | None = Field(
        None, min_length=1, max_length=len(WebhookEventType)
    )
    description: str | None = Field(None, max_length=200, pattern=NO_CONTROL_CHARACTERS)
    # true or false, not 0 or "yes".
    enabled: bool | None = Field(None, strict=True)


class WebhookEndpointOut(Schema):
    """An endpoint as its organisation sees it: never its secret."""

    id: uuid.UUID
    url: str
    events: list[WebhookEventType]
    description: str
    enabled: bool
    # Why it is disabled: by whom, or its receiver's 410, or a day of failures.
    disabled_reason: str
    # The first failed try since the last success (null while it succeeds).
    failing_since: datetime | None
    # Until when deliveries are signed with the secret before the last rotation too.
    previous_secret_until: datetime | None
    created_at: datetime


class WebhookEndpointWithSecret(WebhookEndpointOut):
    """An endpoint and its signing secret (`whsec_…`), shown this once."""

    secret: str


class WebhookEndpointPage(Schema):
    items: list[WebhookEndpointOut]
    count: int
    limit: int
    offset: int


class DeliveryStatusOut(StrEnum):
    PENDING = "pending"
    SUCCEEDED = "succeeded"
    DEAD_LETTER = "dead_letter"
    SKIPPED = "skipped"


class WebhookDeliveryOut(Schema):
    """One event's delivery to the endpoint, and its last try."""

    id: uuid.UUID
    # The event's id: the `webhook-id` of every try.
    event_id: str
    event_type: str
    status: DeliveryStatusOut
    attempts: int
    next_attempt_at: datetime | None
    delivered_at: datetime | None
    last_status_code: int | None
    last_error: str
    # The start of the receiver's last answer, as text (at most 500 characters).
    last_response_excerpt: str
    created_at: datetime


class WebhookDeliveryPage(Schema):
    items: list[WebhookDeliveryOut]
    count: int
    limit: int
    offset: int


# --- The webhooks' bodies (OpenAPI 3.1 `webhooks`: api/openapi.py) -----------------------


class RunEventData(Schema):
    """A run that ended, as `run.*` events tell it."""

    run_id: uuid.UUID
    status: RunStatus
    # The stage it ended in.
    stage: Stage
    source: RunSource
    document_id: uuid.UUID | None
    status_url: str = Field(json_schema_extra={"format": "uri-reference"})
    document_url: str | None = Field(json_schema_extra={"format": "uri-reference"})
    error: RunErrorOut | None


class DocumentDeletedData(Schema):
    document_id: uuid.UUID
    filename: str
    # Who deleted it ("api-token:pl_ab12cd", "user:alice").
    deleted_by: str
    document_url: str = Field(json_schema_extra={"format": "uri-reference"})


class ConnectionPausedData(Schema):
    connection_id: int
    provider: str
    folder: str
    # Why, in words for people.
    reason: str
    # Who or what paused it ("user:alice", "system").
    by: str


class TestEventData(Schema):
    endpoint_id: uuid.UUID
    requested_by: str


class _Envelope(Schema):
    # The event's id: the `webhook-id` header of every try.
    id: str = Field(pattern=r"^evt_[0-9a-f]{32}$")
    timestamp: datetime
    # The organisation's slug.
    organisation: str


class RunEventType(StrEnum):
    RUN_SUCCEEDED = "run.succeeded"
    RUN_FAILED = "run.failed"
    RUN_DEAD_LETTER = "run.dead_letter"
    RUN_CANCELLED = "run.cancelled"


class RunEvent(_Envelope):
    """A run ended: `run.succeeded`, `run.failed`, `run.dead_letter`, `run.cancelled`."""

    type: RunEventType
    data: RunEventData


class DocumentDeletedEvent(_Envelope):
    type: Literal["document.deleted"]
    data: DocumentDeletedData


class ConnectionPausedEvent(_Envelope):
    type: Literal["connection.paused"]
    data: ConnectionPausedData


class TestEvent(_Envelope):
    type: Literal["webhook.test"]
    data: TestEventData


# Each event type and the schema of its body.
WEBHOOK_BODIES: dict[str, type[Schema]] = {
    **{member.value: RunEvent for member in RunEventType},
    "document.deleted": DocumentDeletedEvent,
    "connection.paused": ConnectionPausedEvent,
    "webhook.test": TestEvent,
}
