import uuid
from datetime import datetime

from ninja import Schema


class ErrorOut(Schema):
    detail: str
    code: str | None = None


class QuotaErrorOut(ErrorOut):
    pages_requested: int
    pages_available: int


class AcceptOut(Schema):
    run_id: uuid.UUID
    document_id: uuid.UUID
    status: str
    status_url: str


class DocumentOut(Schema):
    id: uuid.UUID
    filename: str
    kind: str
    size_bytes: int
    version: int
    page_count: int | None
    chunk_count: int
    created_at: datetime
    updated_at: datetime
    latest_run_id: uuid.UUID | None = None
    status: str | None = None


class DocumentPage(Schema):
    items: list[DocumentOut]
    count: int
    limit: int
    offset: int


class QuotaOut(Schema):
    page_limit: int
    pages_used: int
    pages_reserved: int
    pages_available: int
