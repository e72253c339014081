import uuid
from datetime import datetime

from ninja import Schema


class AcceptOut(Schema):
    run_id: uuid.UUID
    document_id: uuid.UUID
    status: str
    status_url: str


class UploadIn(Schema):
    """A file to be PUT straight to storage: its name, its exact size and, optionally, its
    type (application/pdf or the .docx type; otherwise the name's extension says)."""

    filename: str
    size_bytes: int
    content_type: str | None = None


class UploadOut(Schema):
    upload_id: uuid.UUID
    # PUT the file's bytes to `url` with exactly `headers`, before `expires_at`; then
    # POST to `complete_url`, at the latest by `complete_by`.
    url: str
    method: str
    headers: dict[str, str]
    expires_at: datetime
    complete_by: datetime
    complete_url: str


class ConnectorSourceOut(Schema):
    """Where a connector's file came from."""

    connection_id: int
    provider: str
    # The file's path under the connected folder, and the folder.
    path: str
    folder: str
    content_version: str


class DocumentOut(Schema):
    id: uuid.UUID
    filename: str
    kind: str
    size_bytes: int
    version: int
    page_count: int | None
    chunk_count: int
    # Pages whose text could not be read (damaged); the rest was processed.
    unreadable_pages: list[int] = []
    created_at: datetime
    updated_at: datetime
    latest_run_id: uuid.UUID | None = None
    status: str | None = None
    # Set for a document from a connected folder; `deleted_at_source` once its file is gone.
    connector: ConnectorSourceOut | None = None
    deleted_at_source: datetime | None = None


class DocumentPage(Schema):
    items: list[DocumentOut]
    count: int
    limit: int
    offset: int


class ProgressOut(Schema):
    done: int
    total: int


class RunErrorOut(Schema):
    code: str
    message: str


class RunOut(Schema):
    id: uuid.UUID
    status: str
    stage: str
    progress: ProgressOut
    # Every stage attempt the run has made, and those of the stage it is in now.
    attempts: int
    stage_attempts: int
    error: RunErrorOut | None
    document_id: uuid.UUID | None
    page_count: int | None
    # The document's pages whose text could not be read; the rest was processed.
    unreadable_pages: list[int] = []
    created_at: datetime
    updated_at: datetime
    # web, api or connector; `connector` says which connected file.
    source: str
    connector: ConnectorSourceOut | None = None


class SearchHitOut(Schema):
    document_id: uuid.UUID
    filename: str
    pages: int | None
    # The chunk that matched best, and its text around the first word of the query it holds.
    chunk_index: int
    snippet: str
    # Relevance, 0 to 1: 1 is first both by its text and by its embedding's similarity.
    score: float


class SearchOut(Schema):
    results: list[SearchHitOut]
    # "embedding", or "text" when the embedding provider could not embed the query.
    ranking: str


class QuotaOut(Schema):
    page_limit: int
    pages_used: int
    pages_reserved: int
    pages_available: int


class TokenOut(Schema):
    """An API token as its organisation sees it: never its secret or its hash."""

    id: int
    name: str
    # The token's first characters, to tell tokens apart (`pl_AbC123…`).
    prefix: str
    created_at: datetime
    # Written at most once a minute per token (PAPERLANE_TOKEN_TOUCH_SECONDS).
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


class TokenQuery(Schema):
    limit: int = 50
    offset: int = 0
    # Only the active (true) or only the revoked (false) tokens; all when left out.
    active: bool | None = None
