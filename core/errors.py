"""The one domain error type. The API (with `api.errors.ErrorOut`) and the HTML views
render it centrally. Plain Python: importable where Django is not set up."""

from typing import Any


def caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether `exc` or an exception it was raised from (or while handling) is a `kind`:
    libraries wrap the errors they meet (a MemoryError inside a parser's error, say)."""
    cause: BaseException | None = exc
    for _ in range(100):  # a chain that loops ends here
        if cause is None:
            return False
        if isinstance(cause, kind):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


class ServiceError(Exception):
    """A request the services refuse, with the HTTP status that describes why."""

    status_code = 400
    code = "invalid_request"

    def __init__(self, message: str, *, code: str | None = None, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code
        self.extra = extra

    def as_dict(self) -> dict[str, Any]:
        return {"detail": self.message, "code": self.code, **self.extra}

    def headers(self) -> dict[str, str]:
        """HTTP headers the response that renders this error must carry."""
        return {}


class InvalidUpload(ServiceError):
    status_code = 400
    code = "invalid_upload"


class UnreadableDocument(ServiceError):
    """The type is right but the content cannot be used (damaged, encrypted, too big)."""

    status_code = 422
    code = "unreadable_document"


class UnsupportedFileType(ServiceError):
    status_code = 415
    code = "unsupported_type"


class FileTooLarge(ServiceError):
    status_code = 413
    code = "file_too_large"


class QuotaExceeded(ServiceError):
    status_code = 402
    code = "quota_exceeded"


class Forbidden(ServiceError):
    """Inside one's own organisation, an action one's role does not allow (another
    organisation's things are NotFound: their existence is not told)."""

    status_code = 403
    code = "forbidden"


class NotFound(ServiceError):
    status_code = 404
    code = "not_found"


class Conflict(ServiceError):
    status_code = 409
    code = "conflict"


class Gone(ServiceError):
    """It existed, but its time is over (an upload not completed in time)."""

    status_code = 410
    code = "gone"


class RetryLater(ServiceError):
    """Refused for now: the same request may succeed after `retry_after` seconds."""

    def __init__(self, message: str, *, retry_after: int, code: str | None = None) -> None:
        super().__init__(message, code=code, retry_after=retry_after)
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


class SystemBusy(RetryLater):
    """Refused at admission: too much work is waiting. Come back after `retry_after` seconds."""

    status_code = 429
    code = "busy"

    def __init__(self, message: str, *, retry_after: int, reason: str) -> None:
        super().__init__(message, retry_after=retry_after)
        # What was full ("backlog", "late", "organisation"): for the metrics, not the client.
        self.reason = reason


class StorageUnavailable(RetryLater):
    """The document store (S3, a disk) failed: it did not take an upload's file (nothing
    was kept) or did not give a stored file back."""

    status_code = 503
    code = "storage_unavailable"


class TooManyOpenUploads(RetryLater):
    """The organisation has its bound of direct uploads open (asked for, neither completed
    nor expired), in number or in bytes: one of them must end first."""

    status_code = 429
    code = "too_many_open_uploads"
