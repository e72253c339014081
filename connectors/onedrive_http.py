"""HTTP to Microsoft (Graph, its sign-in and its download hosts): the one way the
connectors make a client.

A client made here waits at most its timeout to connect and for each read, follows no
redirect (the caller decides where a Location may lead, and no token goes with it),
asks for the bytes as they are (no compression: a size limit counts what is held in
memory), and keeps no connection once closed.
"""

import functools
import ssl

import httpx


@functools.cache
def _tls() -> ssl.SSLContext:
    # Reading the CA bundle takes tens of milliseconds: once a process, not once a request.
    return httpx.create_ssl_context()


def http_client(*, timeout: float) -> httpx.Client:
    """A client for one exchange (or one download and its redirects), to be closed after."""
    return httpx.Client(
        timeout=httpx.Timeout(timeout),
        follow_redirects=False,
        verify=_tls(),
        headers={"Accept-Encoding": "identity"},
    )


# What the network or a malformed address raises through httpx.
HTTP_FAILURES = (httpx.HTTPError, httpx.InvalidURL)
