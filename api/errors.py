"""How an error looks in an API response: one schema, `ErrorOut`, for every status, with
`code` one of `ErrorCode`. config/api.py renders every error this way."""

from enum import StrEnum
from typing import Any

from ninja import Schema
from pydantic import Field

from documents.models import Membership


class ErrorCode(StrEnum):
    """Every code Paperlane answers with: a refused request's `code`, and a failed run's
    `error.code`. A new code comes with a new minor version of the document (docs/api.md,
    "Changes"): regenerate a client from it."""

    # Any request.
    INVALID_REQUEST = "invalid_request"
    INVALID_CHARACTERS = "invalid_characters"
    INVALID_MULTIPART = "invalid_multipart"
    BAD_REQUEST = "bad_request"
    BODY_TOO_LARGE = "body_too_large"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    CONFLICT = "conflict"
    GONE = "gone"
    RATE_LIMITED = "rate_limited"
    INTERNAL_ERROR = "internal_error"
    # An upload, however it comes, and the checks of its file.
    INVALID_UPLOAD = "invalid_upload"
    MISSING_FILE = "missing_file"
    ONE_FILE_PER_REQUEST = "one_file_per_request"
    UNKNOWN_FIELD = "unknown_field"
    # A member page's form past its bound of files (core/uploads.py, FORM_MAX_FILES).
    TOO_MANY_FILES = "too_many_files"
    INVALID_FILENAME = "invalid_filename"
    INVALID_IDEMPOTENCY_KEY = "invalid_idempotency_key"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    DOCUMENT_DELETED = "document_deleted"
    EMPTY_FILE = "empty_file"
    FILE_TOO_LARGE = "file_too_large"
    UNSUPPORTED_TYPE = "unsupported_type"
    TYPE_MISMATCH = "type_mismatch"
    UNREADABLE_DOCUMENT = "unreadable_document"
    DAMAGED_PDF = "damaged_pdf"
    TRUNCATED_PDF = "truncated_pdf"
    ENCRYPTED_PDF = "encrypted_pdf"
    PDF_TOO_COMPLEX = "pdf_too_complex"
    DAMAGED_DOCX = "damaged_docx"
    DOCX_TOO_LARGE = "docx_too_large"
    DOCX_TOO_COMPRESSED = "docx_too_compressed"
    DAMAGED_IMAGE = "damaged_image"
    IMAGE_TOO_LARGE = "image_too_large"
    NO_PAGES = "no_pages"
    NO_SUCH_PAGE = "no_such_page"
    TOO_MANY_PAGES = "too_many_pages"
    TOO_MUCH_TEXT = "too_much_text"
    INSPECTION_FAILED = "inspection_failed"
    INSPECTION_TOO_LARGE = "inspection_too_large"
    INSPECTION_TOO_SLOW = "inspection_too_slow"
    QUOTA_EXCEEDED = "quota_exceeded"
    BUSY = "busy"
    STORAGE_UNAVAILABLE = "storage_unavailable"
    # Direct uploads.
    PRESIGNED_UNSUPPORTED = "presigned_unsupported"
    INVALID_SIZE = "invalid_size"
    SIZE_MISMATCH = "size_mismatch"
    UPLOAD_MISSING = "upload_missing"
    UPLOAD_EXPIRED = "upload_expired"
    TOO_MANY_OPEN_UPLOADS = "too_many_open_uploads"
    TOO_MANY_OPEN_UPLOAD_BYTES = "too_many_open_upload_bytes"
    OPEN_UPLOAD_BYTES_EXCEEDED = "open_upload_bytes_exceeded"
    # Documents, runs, tokens, search.
    FILE_NOT_STORED = "file_not_stored"
    FILE_MISSING = "file_missing"
    TRANSITION_NOT_ALLOWED = "transition_not_allowed"
    TOKEN_LIMIT_REACHED = "token_limit_reached"
    QUERY_TOO_LONG = "query_too_long"
    SEARCH_TIMEOUT = "search_timeout"
    # Webhook endpoints.
    INVALID_WEBHOOK_ENDPOINT = "invalid_webhook_endpoint"
    INVALID_WEBHOOK_EVENTS = "invalid_webhook_events"
    WEBHOOK_ENDPOINT_LIMIT_REACHED = "webhook_endpoint_limit_reached"
    # A run's error: what stopped it in a stage.
    STAGE_ERROR = "stage_error"
    PERMANENT_ERROR = "permanent_error"
    TRANSIENT_ERROR = "transient_error"
    UNEXPECTED_ERROR = "unexpected_error"
    TIMEOUT = "timeout"
    UNSTORABLE_DATA = "unstorable_data"
    WORKER_LOST = "worker_lost"
    WORKER_STOPPED = "worker_stopped"
    POISON = "poison"
    DEAD_LETTERED_BY_OPERATOR = "dead_lettered_by_operator"
    EXTRACT_MEMORY_LIMIT = "extract_memory_limit"
    EXTRACT_TIME_LIMIT = "extract_time_limit"
    EXTRACT_CPU_LIMIT = "extract_cpu_limit"
    EXTRACT_CRASHED = "extract_crashed"
    FILE_MISMATCH = "file_mismatch"
    TEXT_MISSING = "text_missing"
    TOO_MANY_CHUNKS = "too_many_chunks"
    PAGES_MISSING = "pages_missing"
    # The embedding provider (retrieval/http_embedder.py).
    EMBEDDING_PROVIDER_UNAVAILABLE = "embedding_provider_unavailable"
    # A try made while the provider's breaker was open: it waits, and is not counted.
    EMBEDDING_PROVIDER_OUTAGE = "embedding_provider_outage"
    EMBEDDING_REFUSED = "embedding_refused"
    EMBEDDING_INPUT_REFUSED = "embedding_input_refused"
    EMBEDDING_KEY_REFUSED = "embedding_key_refused"
    EMBEDDING_MODEL_REFUSED = "embedding_model_refused"
    EMBEDDING_DIMENSIONS_MISMATCH = "embedding_dimensions_mismatch"
    # A run of a connected file.
    SOURCE_UNAVAILABLE = "source_unavailable"
    SOURCE_MISSING = "source_missing"
    SOURCE_DELETED = "source_deleted"
    IMPORT_MISSING = "import_missing"
    VERSION_CHANGED = "version_changed"
    SUPERSEDED = "superseded"
    # Its bytes are those of a live document of the organisation: not imported again.
    DUPLICATE = "duplicate"
    PROVIDER_BUSY = "provider_busy"
    PROVIDER_ERROR = "provider_error"
    DOWNLOAD_REFUSED = "download_refused"
    DOWNLOAD_TIMEOUT = "download_timeout"
    FOLDER_MISSING = "folder_missing"
    FOLDER_NOT_ALLOWED = "folder_not_allowed"
    FOLDER_REFUSED = "folder_refused"
    FOLDER_UNREADABLE = "folder_unreadable"
    CONNECTION_NEEDS_RECONNECT = "connection_needs_reconnect"
    CONNECTED_BY_FORMER_MEMBER = "connected_by_former_member"
    CONNECTION_DISCONNECTED = "connection_disconnected"


ERROR_CODES = frozenset(code.value for code in ErrorCode)
# A person's or a token's role in an organisation (documents/roles.py), named for the
# generated clients; its values are Membership.Role's.
OrganisationRole = StrEnum("OrganisationRole", {r.name: r.value for r in Membership.Role})


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def sometimes(description: str, **bounds: Any) -> Any:
    """A field sent only with some errors: left out of the others, never null."""
    return Field(None, description=description, json_schema_extra=_no_default, **bounds)


class FieldErrorOut(Schema):
    """One thing wrong with a request, as pydantic says it."""

    type: str
    # Where: ["query", "limit"], ["body", "payload", "size_bytes"], …
    loc: list[str | int]
    msg: str
    # The bound or pattern it broke: {"le": 200}.
    ctx: dict[str, Any] = sometimes('What the value broke, as {"le": 200}.')


class ErrorOut(Schema):
    """Every error, whatever its status: `detail` is written for a person, `code` for a
    program. The other fields come with the errors that have them."""

    detail: str
    code: ErrorCode
    errors: list[FieldErrorOut] = sometimes("422 invalid_request: each field that is wrong.")
    max_bytes: int = sometimes("413: the largest file accepted, in bytes.", ge=0)
    retry_after: int = sometimes(
        "429 and 503: seconds to wait before sending the same request again (also the "
        "Retry-After header).",
        ge=0,
    )
    pages_requested: int = sometimes("402: the pages the document needs.", ge=0)
    pages_available: int = sometimes("402: the pages the organisation has left.", ge=0)
    role: OrganisationRole = sometimes("403: the role of the token that asked.")
    needed: OrganisationRole = sometimes("403: the least role that may do it.")


# What any operation may answer: a character the API refuses in the path, the query or a
# header (400), no valid token (401), a body over the size any request may have (413),
# the token's requests per minute spent (429), our own failure (500).
ALWAYS = (400, 401, 413, 429, 500)


def errors(*statuses: int) -> dict[int, type[ErrorOut]]:
    """The error answers of an operation: its own `statuses` and those of every one."""
    return {status: ErrorOut for status in sorted({*ALWAYS, *statuses})}
