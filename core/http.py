"""HTTP helpers the doors share (the member pages, the API, the middleware): which requests
are the API's, how a file is offered for download under its own name, and how something
a browser may keep is sent (its ETag, 304).

`is_api_request` judges the path within the site (`path_info`): a site served under a
prefix (SCRIPT_NAME) has its API at /prefix/api/, which `request.path` starts with.
"""

import os
import unicodedata
from collections.abc import Callable
from typing import BinaryIO, Protocol
from urllib.parse import quote

from django.http import FileResponse, HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.cache import get_conditional_response, patch_cache_control

API_PREFIX = "/api/"
# Blocks of 64 KiB rather than FileResponse's 4 KiB: a read from S3 is a call through
# botocore.
FILE_BLOCK_BYTES = 64 * 1024


def is_api_request(request: HttpRequest) -> bool:
    """Whether the request is the API's: under it every error is JSON, and an upload
    carries one file."""
    return request.path_info.startswith(API_PREFIX)


class Stream(Protocol):
    """Stored bytes to serve: their size, and a file to read them from (closed at the end)."""

    size: int
    file: BinaryIO


def download_response(*, stored: Stream | str, filename: str, content_type: str) -> HttpResponse:
    """The answer that serves a stored file: its bytes, streamed a block at a time and
    closed at the end, as an attachment named `filename`; or, for a URL, a redirect to
    it (a short-lived link that serves them). Neither is kept by a cache on the way."""
    if isinstance(stored, str):
        response = HttpResponseRedirect(stored)
    else:
        response = FileResponse(stored.file, content_type=content_type)
        response.block_size = FILE_BLOCK_BYTES
        response["Content-Length"] = str(stored.size)
        response["Content-Disposition"] = attachment(filename)
    response["Cache-Control"] = "private, no-store"
    return response


# Printable ASCII that every client reads back as written in a quoted filename: not the
# quote and backslash (escapes some clients ignore) nor the percent sign (which some
# decode). A name of only these needs nothing more.
_PLAIN = frozenset(chr(c) for c in range(0x20, 0x7F)) - {'"', "\\", "%"}


def attachment(filename: str, *, fallback: str = "document") -> str:
    """`attachment` with `filename` (RFC 6266): as it is when it is plain ASCII; otherwise
    an ASCII approximation as `filename` for old clients and the name as `filename*`
    (RFC 5987, UTF-8, percent-encoded), normalised (NFKC). Control characters, folder
    separators and ".." never reach the header, whatever characters stood for them."""
    name = unicodedata.normalize("NFKC", filename)
    name = _plain_name("".join(c for c in name if unicodedata.category(c)[0] != "C"), fallback)
    if set(name) <= _PLAIN:
        return f'attachment; filename="{name}"'
    stem, extension = os.path.splitext(name)
    plain = " ".join("".join(c if c in _PLAIN else "_" for c in _ascii(stem)).split())
    plain = (plain.strip("_") or fallback) + "".join(c for c in _ascii(extension) if c in _PLAIN)
    # Dropping what is not ASCII may bring two dots together ("a.報.pdf").
    plain = _plain_name(plain, fallback)
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(name, safe='')}"


def _plain_name(name: str, fallback: str) -> str:
    """`name` without folders, "..", or a leading dot (a hidden file on the client's disk)."""
    name = name.replace("/", "_").replace("\\", "_")
    while ".." in name:
        name = name.replace("..", ".")
    return name.strip().lstrip(".").strip() or fallback


def _ascii(text: str) -> str:
    """Letters with accents as the letters alone ("é" as "e"); other non-ASCII dropped."""
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def kept_response(
    request: HttpRequest, *, tag: str, body: Callable[[], bytes], content_type: str, max_age: int
) -> HttpResponse:
    """`body()` with the ETag `tag`, which the browser may keep privately for `max_age`
    seconds; a 304, without calling `body`, to an If-None-Match that holds `tag`. What
    `body` raises goes to the caller."""
    response = get_conditional_response(request, etag=tag)
    if response is None:
        response = HttpResponse(body(), content_type=content_type)
    response["ETag"] = tag
    patch_cache_control(response, private=True, max_age=max_age)
    return response
