from datetime import datetime

from ninja import Schema


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
