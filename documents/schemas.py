import unicodedata
from datetime import datetime

from ninja import Field, Schema
from pydantic import field_validator

from core.schemas import ErrorOut
from documents.models import ApiToken

TOKEN_NAME_MAX = ApiToken._meta.get_field("name").max_length


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


class TokenCreatedOut(TokenOut):
    # The secret: in this response only. It is stored hashed and cannot be shown again.
    token: str


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


class TokenCreateIn(Schema):
    # What the token is for, e.g. the integration that uses it; surrounding spaces dropped.
    name: str = Field(..., min_length=1, max_length=TOKEN_NAME_MAX)

    @field_validator("name", mode="before")
    @classmethod
    def _readable(cls, value):
        if not isinstance(value, str):
            return value
        value = value.strip()
        if any(unicodedata.category(char) == "Cc" for char in value):
            raise ValueError("the name must be plain text, without control characters")
        return value


class TokenLimitErrorOut(ErrorOut):
    """409 `token_limit_reached`: the organisation has `limit` active tokens already."""

    limit: int
