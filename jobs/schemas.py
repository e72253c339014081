import uuid
from datetime import datetime

from ninja import Schema


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
    attempts: int
    error: RunErrorOut | None
    document_id: uuid.UUID | None
    page_count: int | None
    created_at: datetime
    updated_at: datetime
