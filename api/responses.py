"""Answers the routers share that are not JSON bodies."""

from django.http import HttpResponse

# A file's bytes, as OpenAPI says it.
BINARY_FILE = {"type": "string", "format": "binary"}


def no_content() -> HttpResponse:
    """204, with no body and so no Content-Type."""
    response = HttpResponse(status=204)
    del response["Content-Type"]
    return response
