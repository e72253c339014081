"""Fetching a OneDrive file from its pre-authenticated `@microsoft.graph.downloadUrl`.

The link comes from Graph's answer and is fetched with no token, but it is still a
URL someone else wrote: it is fetched only over HTTPS from Microsoft's download hosts
(PAPERLANE_ONEDRIVE_DOWNLOAD_HOSTS), and so is every redirect it leads to (a few at
most). No other scheme is even possible: the opener knows HTTP(S) alone (urllib's
default one also reads file:, ftp: and data: URLs). Each read waits at most the
OneDrive timeout, the whole download at most PAPERLANE_CONNECTOR_DOWNLOAD_SECONDS,
and no more than PAPERLANE_CONNECTOR_MAX_FILE_BYTES is read.
"""

import io
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import BinaryIO

from django.conf import settings

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
    host = urllib.parse.urlsplit(url).hostname or url[:100]
    return PermanentError(
        f"OneDrive's download link led to {host}, which is not fetched: {why} "
        "(PAPERLANE_ONEDRIVE_DOWNLOAD_HOSTS).",
        code="download_refused",
    )


class _CheckedRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to where the link itself could have pointed."""

    max_redirections = MAX_REDIRECTS

    def http_error_302(self, req, fp, code, msg, headers):
        target = headers.get("location") or headers.get("uri")
        if target:
            target = urllib.parse.urljoin(req.full_url, target)
            why = download_refusal(target)
            if why:
                fp.close()
                raise _refused(target, why)
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


def _opener() -> urllib.request.OpenerDirector:
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),
        urllib.request.HTTPHandler(),
        urllib.request.HTTPSHandler(),
        _CheckedRedirects(),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener


class _Stream(io.RawIOBase):
    """A download being read, within its time and size: network failures mid-way are
    transient stage errors. Reads return what one receive gave (read1), so the time
    limit holds even against a server that trickles its bytes."""

    def __init__(self, response, *, deadline: float, limit: int) -> None:
        self._response = response
        self._deadline = deadline
        self._limit = limit
        self._read = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if time.monotonic() > self._deadline:
            raise TransientError(
                "The OneDrive download took longer than "
                f"{settings.PAPERLANE_CONNECTOR_DOWNLOAD_SECONDS:.0f} s.",
                code="download_timeout",
            )
        try:
            block = self._response.read1(size if size and size > 0 else 1024 * 1024)
        except OSError as exc:
            raise TransientError(
                f"The OneDrive download broke off ({exc}).", code="source_unavailable"
            ) from exc
        self._read += len(block)
        if self._read > self._limit:
            raise _too_large(self._limit)
        return block

    def close(self) -> None:
        self._response.close()
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
    limit = settings.PAPERLANE_CONNECTOR_MAX_FILE_BYTES
    deadline = time.monotonic() + settings.PAPERLANE_CONNECTOR_DOWNLOAD_SECONDS
    # Pre-authenticated: no Authorization header goes with it.
    request = urllib.request.Request(link, method="GET")
    try:
        response = _opener().open(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code in (401, 403, 404, 410):
            return None
        raise TransientError(
            f"The OneDrive download failed ({exc.code}).", code="source_unavailable"
        ) from exc
    except OSError as exc:
        raise TransientError(
            f"The OneDrive download failed ({exc}).", code="source_unavailable"
        ) from exc
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        response.close()
        raise _too_large(limit)
    return _Stream(response, deadline=deadline, limit=limit)  # type: ignore[return-value]
