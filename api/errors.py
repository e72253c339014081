"""How a `core.errors.ServiceError` looks in an API response."""

from ninja import Schema


class ErrorOut(Schema):
    """How every ServiceError looks in an API response."""

    detail: str
    code: str | None = None


class QuotaErrorOut(ErrorOut):
    pages_requested: int
    pages_available: int


class BusyErrorOut(ErrorOut):
    """429 (the pipeline is full) or 503 (the file could not be stored or read): send the
    same request again after `retry_after` seconds (also the `Retry-After` header)."""

    retry_after: int


class ForbiddenOut(ErrorOut):
    """403: the token's role (viewer, member, admin) does not allow this action; `needed`
    is the least role that does."""

    role: str
    needed: str
