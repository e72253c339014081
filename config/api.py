"""The one NinjaAPI. Each app adds its router; every error is rendered here, as
`{"detail": …, "code": …}` with the status that says why."""

import logging
import math

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import Http404
from django.http.multipartparser import MultiPartParserError
from ninja import NinjaAPI, Swagger
from ninja.errors import AuthenticationError, HttpError, Throttled, ValidationError

from api import openapi
from api.auth import ApiTokenAuth
from api.documents import router as documents_router
from api.parser import ClientTextParser
from api.throttle import TokenRateThrottle
from api.tokens import router as organisation_router
from api.uploads import router as uploads_router
from api.webhooks import router as webhooks_router
from core.errors import ServiceError

logger = logging.getLogger("django.request")


class PaperlaneAPI(NinjaAPI):
    def get_openapi_schema(self, **kwargs):
        schema = super().get_openapi_schema(**kwargs)
        return openapi.finish(schema, servers=settings.PAPERLANE_API_SERVERS)


api = PaperlaneAPI(
    title="Paperlane API",
    version=openapi.VERSION,
    description=(
        "Upload PDF and DOCX documents and scans (PNG, JPEG, TIFF), follow their "
        "processing, search them, read your quota, manage your API tokens. Every request "
        "sends `Authorization: Bearer <token>`; every error is `{detail, code}` "
        "(`ErrorOut`). Changes: docs/api.md."
    ),
    auth=ApiTokenAuth(),
    throttle=TokenRateThrottle(),
    parser=ClientTextParser(),
    # Swagger UI from ninja's own static files (ninja is an installed app), and no badge
    # fetched from the validator's site.
    docs=Swagger(settings={"validatorUrl": None}),
    urls_namespace="api",
)
api.add_router("", documents_router)
api.add_router("", uploads_router)
api.add_router("", organisation_router)
api.add_router("", webhooks_router)

# ninja raises 400 for a JSON body that does not parse.
_HTTP_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found"}


def _error(request, status: int, detail: str, code: str, **extra):
    return api.create_response(request, {"detail": detail, "code": code, **extra}, status=status)


@api.exception_handler(ServiceError)
def service_error(request, exc: ServiceError):
    response = api.create_response(request, exc.as_dict(), status=exc.status_code)
    for header, value in exc.headers().items():
        response[header] = value
    return response


@api.exception_handler(HttpError)
def http_error(request, exc: HttpError):
    if isinstance(exc.__cause__, ServiceError):
        # A refusal made while ninja parsed the body (core/client_text.py), not a parse error.
        return service_error(request, exc.__cause__)
    if isinstance(exc, Throttled):
        # ninja adds Retry-After from the same wait.
        wait = math.ceil(exc.wait or 1)
        limit = settings.PAPERLANE_API_RATE_PER_MINUTE
        detail = f"This token made {limit} requests in the last minute; try again in {wait} s."
        return _error(request, 429, detail, "rate_limited", retry_after=wait)
    if isinstance(exc, AuthenticationError):
        response = _error(
            request, 401, "Send a valid API token: Authorization: Bearer <token>.", "unauthorized"
        )
        response["WWW-Authenticate"] = "Bearer"
        return response
    code = _HTTP_CODES.get(exc.status_code, "invalid_request")
    return _error(request, exc.status_code, str(exc), code)


@api.exception_handler(Http404)
def not_found(request, exc: Http404):
    return _error(request, 404, "Not found.", "not_found")


@api.exception_handler(ValidationError)
def invalid_request(request, exc: ValidationError):
    """The fields that are wrong, in a sentence and, for programs, as pydantic lists them."""
    wrong = [
        f"{'.'.join(str(part) for part in error.get('loc', ()))}: {error.get('msg', 'invalid')}"
        for error in exc.errors
    ]
    detail = "The request is not valid (" + "; ".join(wrong) + ")."
    return _error(request, 422, detail, "invalid_request", errors=exc.errors)


@api.exception_handler(MultiPartParserError)
def invalid_multipart(request, exc: MultiPartParserError):
    return _error(
        request,
        400,
        "The request body is not valid multipart/form-data; send the file in a field named 'file'.",
        "invalid_multipart",
    )


@api.exception_handler(RequestDataTooBig)
def body_too_large(request, exc: RequestDataTooBig):
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return _error(request, 413, f"The request's body is over {limit} bytes.", "body_too_large")


@api.exception_handler(TooManyFieldsSent)
@api.exception_handler(TooManyFilesSent)
def too_many_parts(request, exc: Exception):
    return _error(
        request,
        400,
        "The form has more fields or files than a request may; send the file in one field "
        "named 'file'.",
        "invalid_multipart",
    )


@api.exception_handler(Exception)
def internal_error(request, exc: Exception):
    """Anything else is our fault: logged with its traceback, answered in JSON all the same."""
    logger.error(
        "Internal Server Error: %s",
        request.path,
        exc_info=exc,
        extra={"status_code": 500, "request": request},
    )
    return _error(
        request, 500, "Something went wrong on our side; it has been logged.", "internal_error"
    )
