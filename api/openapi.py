"""What the OpenAPI document says beyond what ninja derives from the routers: what each
error status means, the headers that come with it, an example body, the tags' texts and
the servers. `PaperlaneAPI` (config/api.py) applies it to the document it serves."""

import copy
from typing import Any

from api.schemas import WEBHOOK_BODIES

# The version of the API's contract, in the document's `info` (docs/api.md, "Changes").
VERSION = "1.10.0"

TAGS = [
    {"name": "documents", "description": "Upload documents, list, read, download, delete."},
    {"name": "runs", "description": "Follow a document's processing; retry or cancel it."},
    {"name": "search", "description": "Find the organisation's documents by their text."},
    {
        "name": "uploads",
        "description": "Large files PUT straight to storage (S3 deployments only).",
    },
    {"name": "organisation", "description": "The organisation's page quota and API tokens."},
    {
        "name": "webhooks",
        "description": "Endpoints told of runs that end, documents deleted and folders "
        "paused: signed (Standard Webhooks), retried, each delivery kept.",
    },
]

_RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before sending the same request again.",
        "required": True,
        "schema": {"type": "integer", "minimum": 0},
    }
}

# For each error status: what it means on any operation, the headers it carries and an
# example body. An operation's own docstring says which codes it adds.
ERRORS: dict[str, dict[str, Any]] = {
    "400": {
        "description": "The request is refused as sent (`code` says why): for instance "
        "a character the API does not take (`invalid_characters`), a body that is not "
        "valid multipart (`invalid_multipart`).",
        "example": {
            "detail": "The query parameter 'q' holds a NUL character (U+0000), which cannot "
            "be accepted.",
            "code": "invalid_characters",
        },
    },
    "401": {
        "description": "No valid API token: `Authorization: Bearer <token>` is missing, "
        "unknown or revoked.",
        "headers": {"WWW-Authenticate": {"required": True, "schema": {"type": "string"}}},
        "example": {
            "detail": "Send a valid API token: Authorization: Bearer <token>.",
            "code": "unauthorized",
        },
    },
    "402": {
        "description": "The organisation has not enough pages left (`quota_exceeded`).",
        "example": {
            "detail": "This document needs 12 pages but only 3 of your page quota are left.",
            "code": "quota_exceeded",
            "pages_requested": 12,
            "pages_available": 3,
        },
    },
    "403": {
        "description": "The token's role does not allow this (`forbidden`); `needed` is the "
        "least role that does.",
        "example": {
            "detail": "This API token has the viewer role: only members and admins may "
            "upload documents. Ask an admin of the organisation.",
            "code": "forbidden",
            "role": "viewer",
            "needed": "member",
        },
    },
    "404": {
        "description": "Not found in the token's organisation (`not_found`).",
        "example": {"detail": "Not found.", "code": "not_found"},
    },
    "409": {
        "description": "Not possible in the state the thing is in now (`code` says which).",
        "example": {
            "detail": "The run has already ended (succeeded).",
            "code": "conflict",
        },
    },
    "410": {
        "description": "Too late: the upload expired (`upload_expired`).",
        "example": {
            "detail": "This upload could be completed until 2026-12-01 12:00:00 UTC and was "
            "not; ask for a new one.",
            "code": "upload_expired",
        },
    },
    "413": {
        "description": "The file is larger than the server takes (`file_too_large`), or the "
        "request's body is, whatever it holds (`body_too_large`).",
        "example": {
            "detail": "The file is 73400320 bytes; the limit is 52428800 bytes.",
            "code": "file_too_large",
            "max_bytes": 52428800,
        },
    },
    "415": {
        "description": "The file is not a PDF, a Word (.docx) document or a PNG, JPEG or TIFF "
        "picture (`unsupported_type`).",
        "example": {
            "detail": "Only PDF, Word (.docx), PNG, JPEG and TIFF files are supported; this "
            "file is of an unrecognised type.",
            "code": "unsupported_type",
        },
    },
    "422": {
        "description": "A parameter is outside its bounds or of the wrong type "
        "(`invalid_request`, with `errors`), or the document cannot be read (damaged, "
        "encrypted, too complex: `code` says which).",
        "example": {
            "detail": "The request is not valid (query.limit: Input should be less than or "
            "equal to 200).",
            "code": "invalid_request",
            "errors": [
                {
                    "type": "less_than_equal",
                    "loc": ["query", "limit"],
                    "msg": "Input should be less than or equal to 200",
                }
            ],
        },
    },
    "429": {
        "description": "Too much at once: the token's requests per minute (`rate_limited`), "
        "the pipeline's backlog (`busy`) or the organisation's open uploads. Send the same "
        "request again after `Retry-After` seconds.",
        "headers": _RETRY_AFTER,
        "example": {
            "detail": "The system is busy; please try again in 30 seconds.",
            "code": "busy",
            "retry_after": 30,
        },
    },
    "500": {
        "description": "Something went wrong on our side (`internal_error`); it has been logged.",
        "example": {
            "detail": "Something went wrong on our side; it has been logged.",
            "code": "internal_error",
        },
    },
    "503": {
        "description": "Storage or search did not answer in time; nothing was changed. Send "
        "the same request again after `Retry-After` seconds.",
        "headers": _RETRY_AFTER,
        "example": {
            "detail": "We could not store the file just now; nothing was kept. Please try "
            "again in a minute.",
            "code": "storage_unavailable",
            "retry_after": 60,
        },
    },
}


def finish(schema: dict[str, Any], *, servers: list[str]) -> dict[str, Any]:
    """`schema` as ninja made it, with each error answer described, its headers and an
    example, and the tags and servers."""
    for operation in _operations(schema):
        for status, response in operation["responses"].items():
            known = ERRORS.get(str(status))
            if known is None:
                continue
            response["description"] = known["description"]
            if "headers" in known:
                response["headers"] = copy.deepcopy(known["headers"])
            for media in response.get("content", {}).values():
                media["example"] = copy.deepcopy(known["example"])
    schema["info"]["version"] = VERSION
    schema["webhooks"] = _webhooks(schema.setdefault("components", {}).setdefault("schemas", {}))
    schema["tags"] = copy.deepcopy(TAGS)
    schema["servers"] = [{"url": url} for url in servers] or [{"url": "/"}]
    return schema


# The headers of every try (docs/webhooks.md, "Verifying a delivery").
_WEBHOOK_HEADERS = [
    ("webhook-id", "The event's id (`evt_…`): the same on every try, to drop a repeat."),
    ("webhook-timestamp", "The try's time, in Unix seconds."),
    (
        "webhook-signature",
        "`v1,` and the base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}` under "
        "the endpoint's secret; one per secret in force, separated by spaces.",
    ),
]


def _webhooks(components: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI 3.1 `webhooks`: what an endpoint receives for each event type, its body's
    schema added to `components`."""
    hooks = {}
    for event_type, body in WEBHOOK_BODIES.items():
        definition = body.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, part in definition.pop("$defs", {}).items():
            components.setdefault(name, part)
        components.setdefault(body.__name__, definition)
        hooks[event_type] = {
            "post": {
                "operationId": "webhook_" + event_type.replace(".", "_"),
                "summary": f"`{event_type}`, sent to the endpoints that want it",
                "tags": ["webhooks"],
                "parameters": [
                    {
                        "name": name,
                        "in": "header",
                        "required": True,
                        "description": description,
                        "schema": {"type": "string"},
                    }
                    for name, description in _WEBHOOK_HEADERS
                ],
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {"$ref": f"#/components/schemas/{body.__name__}"}
                        }
                    },
                },
                "responses": {
                    "2XX": {"description": "Received: not sent again."},
                    "410": {"description": "Gone: the endpoint is disabled, nothing more sent."},
                    "default": {
                        "description": "Any other answer, or none within the try's time: "
                        "tried again on the schedule."
                    },
                },
            }
        }
    return hooks


def _operations(schema: dict[str, Any]):
    for path in schema["paths"].values():
        yield from path.values()
