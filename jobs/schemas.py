import uuid
from datetime import datetime

from ninja import Schema


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
    created_at: datetime
    updated_at: datetime
