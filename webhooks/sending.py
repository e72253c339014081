"""One try of a webhook, safe to point anywhere: to an address checked before connecting,
within a connect and a total time limit, redirects not followed, the answer read to a
small bound.

The receiver's name is resolved once per try; every address it resolves to must be a
public one (not private, loopback, link-local, shared, reserved or multicast, which
include the cloud metadata addresses) unless it is in one of the operator's allowed
networks (PAPERLANE_WEBHOOK_ALLOWED_NETWORKS). The connection goes to the address
checked, never to a second resolution of the name. Plain HTTP is sent only to allowed
networks: receivers inside the operator's own network. HTTPS verifies the receiver's
certificate for its name.

httpx sends the request (the one HTTP client of the project); its network backend here
is the standard one with the check before connecting and a watchdog that closes the
socket at the try's end, which bounds the whole try however slowly a receiver answers.
"""

import concurrent.futures
import ipaddress
import socket
import threading
import time
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

import httpcore
import httpx
from httpcore._backends.sync import SyncBackend

# The first bytes of an answer read, and the characters of them kept as its excerpt.
ANSWER_BYTES = 4096
EXCERPT_CHARS = 500
# Names being resolved at once (a resolver that hangs holds one until it gives up).
_resolver = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="webhook-dns")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Answer:
    """What a try got: the receiver's status code and the start of its answer, or why
    there was none (`error`)."""

    status_code: int | None = None
    excerpt: str = ""
    error: str = ""

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


class AddressRefused(httpcore.ConnectError):
    """The receiver's name resolves to an address webhooks may not be sent to."""


def networks_parse(values: Iterable[str]) -> list[Network]:
    """The allowed networks of the setting (CIDRs); ValueError names a bad one."""
    return [ipaddress.ip_network(value.strip(), strict=False) for value in values if value.strip()]


def _ip(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _within(address: str, allowed: list[Network]) -> bool:
    ip = _ip(address)
    return any(ip in network for network in allowed)


def address_allowed(address: str, allowed: list[Network]) -> bool:
    """Whether webhooks may go to `address`: a public one, or one in `allowed`."""
    ip = _ip(address)
    return _within(address, allowed) or (ip.is_global and not ip.is_multicast)


class _Checked(SyncBackend):
    """The standard backend, connecting only to addresses `address_allowed` passes (all of
    a name's, or none), and closing the socket at `deadline` (time.monotonic)."""

    def __init__(self, *, allowed: list[Network], plain: bool, deadline: float) -> None:
        self.allowed, self.plain, self.deadline = allowed, plain, deadline
        self.timers: list[threading.Timer] = []
        # Why the receiver's address was refused ("" if it was not).
        self.refused = ""

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        remaining = self.deadline - time.monotonic()
        timeout = min(timeout or remaining, remaining)
        addresses = self._resolve(host, port, timeout)
        for address in addresses:
            if not address_allowed(address, self.allowed):
                self._refuse(
                    f"{host} is at {address}, a private or reserved address; webhooks go "
                    "there only if PAPERLANE_WEBHOOK_ALLOWED_NETWORKS names its network"
                )
            if self.plain and not _within(address, self.allowed):
                self._refuse(
                    f"{host} is at {address}: plain HTTP is sent only to the networks in "
                    "PAPERLANE_WEBHOOK_ALLOWED_NETWORKS; use https://"
                )
        error: Exception | None = None
        for address in addresses:
            try:
                stream = super().connect_tcp(
                    address,
                    port,
                    max(self.deadline - time.monotonic(), 0.001),
                    None,
                    socket_options,
                )
            except httpcore.ConnectError as exc:
                error = exc
                continue
            self._close_at_deadline(stream)
            return stream
        raise error or httpcore.ConnectError(f"{host} could not be reached")

    def _refuse(self, reason: str) -> None:
        self.refused = reason
        raise AddressRefused(reason)

    def _resolve(self, host: str, port: int, timeout: float) -> list[str]:
        future = _resolver.submit(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
        try:
            infos = future.result(timeout=max(timeout, 0.001))
        except concurrent.futures.TimeoutError:
            raise httpcore.ConnectTimeout(f"{host} was not resolved in time") from None
        except OSError as exc:
            raise httpcore.ConnectError(f"{host} could not be resolved: {exc}") from exc
        return list(dict.fromkeys(info[4][0] for info in infos))

    def _close_at_deadline(self, stream) -> None:
        sock = stream.get_extra_info("socket")

        def close() -> None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        timer = threading.Timer(max(self.deadline - time.monotonic(), 0), close)
        timer.daemon = True
        timer.start()
        self.timers.append(timer)


def webhook_post(
    *,
    url: str,
    body: bytes,
    headers: dict[str, str],
    allowed: list[Network],
    connect_seconds: float,
    total_seconds: float,
) -> Answer:
    """POST `body` to `url` once; never raises for what the receiver or the network did."""
    started = time.monotonic()
    deadline = started + total_seconds
    scheme = httpx.URL(url).scheme
    if scheme not in ("http", "https"):
        return Answer(error=f"{scheme or 'this'} addresses are not sent to; use https://")
    backend = _Checked(allowed=allowed, plain=scheme == "http", deadline=deadline)
    transport = httpx.HTTPTransport(trust_env=False)
    transport._pool = httpcore.ConnectionPool(
        ssl_context=httpx.create_ssl_context(trust_env=False),
        max_connections=1,
        max_keepalive_connections=0,
        network_backend=backend,
    )
    timeout = httpx.Timeout(total_seconds, connect=min(connect_seconds, total_seconds))
    request_headers = {"content-type": "application/json", "user-agent": "Paperlane-Webhooks/1"}
    request_headers.update(headers)
    try:
        with httpx.Client(
            transport=transport, timeout=timeout, follow_redirects=False, trust_env=False
        ) as client:
            with client.stream("POST", url, content=body, headers=request_headers) as response:
                data = b""
                for block in response.iter_raw():
                    data += block
                    if len(data) >= ANSWER_BYTES:
                        break
                return Answer(
                    status_code=response.status_code, excerpt=excerpt(data[:ANSWER_BYTES])
                )
    except httpx.ConnectTimeout:
        return Answer(error=f"no connection within {connect_seconds:g} s")
    except httpx.TimeoutException:
        return Answer(error=f"no answer within {total_seconds:g} s")
    except httpx.HTTPError as exc:
        if backend.refused:
            return Answer(error=backend.refused)
        if time.monotonic() >= deadline:
            return Answer(error=f"no answer within {total_seconds:g} s")
        return Answer(error=f"{type(exc).__name__}: {exc}"[:300])
    finally:
        for timer in backend.timers:
            timer.cancel()


def excerpt(data: bytes) -> str:
    """The start of an answer as text fit to show: decoded leniently, without control
    characters, at most EXCERPT_CHARS."""
    text = data.decode("utf-8", errors="replace")
    text = "".join(c if unicodedata.category(c)[0] != "C" or c in "\n\t" else " " for c in text)
    return text[:EXCERPT_CHARS]
