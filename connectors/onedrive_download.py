"""Fetching a OneDrive file from its pre-authenticated `@microsoft.graph.downloadUrl`.

The link comes from Graph's answer and is fetched with no token, but it is still a
URL someone else wrote: it is fetched only over HTTPS from Microsoft's download hosts
(PAPERLANE_ONEDRIVE_DOWNLOAD_HOSTS), and so is every redirect it leads to (a few at
most, each checked before it is asked). No other scheme is even possible: the client
(connectors/onedrive_http.py) knows HTTP(S) alone. Each read waits at most the
OneDrive timeout, the whole download at most the store stage's (connectors/source.py,
DOWNLOAD_SECONDS), and no more than PAPERLANE_MAX_UPLOAD_BYTES is read.
"""

import io
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import ExitStack
from typing import BinaryIO

import httpx
from django.conf import settings

from connectors import source
from connectors.onedrive_http import HTTP_FAILURES, http_client
from core.text import ascii_number
from pipeline.errors import PermanentError, TransientError

# Redirects one download may follow (each checked as the link itself is).
MAX_REDIRECTS = 5


def download_refusal(url: str) -> str | None:
    """Why `url` may not be fetched as a download, or None if it may.

    PAPERLANE_ONEDRIVE_DOWNLOAD_HOSTS entries: ".sharepoint.com" (any host ending so),
    "graph.microsoft.com" (that host), both HTTPS on its usual port only; or an origin
    "http://127.0.0.1:8123" (exactly that scheme, host and port: a local stand-in such
    as the tests' Graph).
    """
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        return "it is not a valid URL"
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if not host:
        return "it names no host"
    if parts.username is not None or parts.password is not None:
        return "it carries credentials"
    origin = f"{scheme}://{host}" + (f":{port}" if port is not None else "")
    for entry in settings.PAPERLANE_ONEDRIVE_DOWNLOAD_HOSTS:
        entry = entry.strip().lower().rstrip("/")
        if "://" in entry:
            if origin == entry:
                return None
            continue
        if scheme != "https" or port not in (None, 443):
            continue
        if (entry.startswith(".") and host.endswith(entry)) or host == entry:
            return None
    if scheme != "https":
        return f"it is not HTTPS ({scheme or 'no scheme'})"
    return f"{host} is not one of Microsoft's download hosts"


def _refused(url: str, why: str) -> PermanentError:
    try:
        host = urllib.parse.urlsplit(url).hostname or url[:100]
    except ValueError:
        host = url[:100]
    return PermanentError(
        f"OneDrive's download link led to {host}, which is not fetched: {why} "
        "(PAPERLANE_ONEDRIVE_DOWNLOAD_HOSTS).",
        code="download_refused",
    )


def _follow(client: httpx.Client, link: str) -> httpx.Response:
    """The answer at the end of the link's redirects, each checked before it is asked;
    after MAX_REDIRECTS, whatever the next answer is (a redirect still: a failure). Its
    body is not read yet."""
    url = link
    for _ in range(MAX_REDIRECTS):
        response = _get(client, url)
        if not response.has_redirect_location:
            return response
        response.close()
        target = response.headers["location"]
        try:
            url = str(response.url.join(target))
        except httpx.InvalidURL:
            raise _refused(target, "it is not a valid URL") from None
        why = download_refusal(url)
        if why:
            raise _refused(url, why)
    return _get(client, url)


def _get(client: httpx.Client, url: str) -> httpx.Response:
    try:
        # Pre-authenticated: no Authorization header goes with it.
        return client.send(client.build_request("GET", url), stream=True)
    except HTTP_FAILURES as exc:
        raise TransientError(
            f"The OneDrive download failed ({exc}).", code="source_unavailable"
        ) from exc


class _Stream(io.RawIOBase):
    """A download being read, within its time and size: network failures mid-way are
    transient stage errors. A read returns at most what one receive gave, so the time
    limit holds even against a server that trickles its bytes."""

    def __init__(
        self, client: httpx.Client, response: httpx.Response, *, deadline: float, limit: int
    ) -> None:
        self._client = client
        self._response = response
        self._blocks: Iterator[bytes] = response.iter_raw()
        self._pending = b""
        self._deadline = deadline
        self._limit = limit
        self._read = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if time.monotonic() > self._deadline:
            raise TransientError(
                "The OneDrive download took longer than "
                f"{source.DOWNLOAD_SECONDS:.0f} s.",
                code="download_timeout",
            )
        if not self._pending:
            try:
                self._pending = next(self._blocks, b"")
            except HTTP_FAILURES as exc:
                raise TransientError(
                    f"The OneDrive download broke off ({exc}).", code="source_unavailable"
                ) from exc
            self._read += len(self._pending)
            if self._read > self._limit:
                raise _too_large(self._limit)
        size = size if size and size > 0 else len(self._pending)
        block, self._pending = self._pending[:size], self._pending[size:]
        return block

    def close(self) -> None:
        self._response.close()
        self._client.close()
        super().close()


def _too_large(limit: int) -> PermanentError:
    return PermanentError(
        f"The file is larger than {limit:,} bytes, the limit for one file.",
        code="file_too_large",
    )


def download_open(link: str, *, timeout: float) -> BinaryIO | None:
    """The download's stream; None if the link was refused as expired (401, 403, 404,
    410: fetch a new one). PermanentError if the link, or a redirect, leads anywhere but
    Microsoft's download hosts, or the file is too large; TransientError if it fails."""
    why = download_refusal(link)
    if why:
        raise _refused(link, why)
    limit = settings.PAPERLANE_MAX_UPLOAD_BYTES
    deadline = time.monotonic() + source.DOWNLOAD_SECONDS
    with ExitStack() as closing:
        client = closing.enter_context(http_client(timeout=timeout))
        response = _follow(client, link)
        closing.callback(response.close)
        status = response.status_code
        if status in (401, 403, 404, 410):
            return None
        if not 200 <= status < 300:
            raise TransientError(
                f"The OneDrive download failed ({status}).", code="source_unavailable"
            )
        declared = ascii_number(response.headers.get("content-length", ""))
        if declared is not None and declared > limit:
            raise _too_large(limit)
        # From here the stream closes them.
        closing.pop_all()
    return _Stream(client, response, deadline=deadline, limit=limit)  # type: ignore[return-value]
