"""Every Graph and sign-in call is bounded: it waits at most its timeout, follows no
redirect, reads no more than it expects, asks for no compression, and never sends our
token off the configured Graph: against local servers that hang, redirect or flood."""

import dataclasses
import time
from http.server import BaseHTTPRequestHandler

import pytest

from connectors.base import ProviderError
from connectors.onedrive_graph import GraphClient, OneDriveConfig, Tokens, http_request
from connectors.problems import Problem
from tests.support.loopback import LoopbackServer
from tests.support.silent import silent_server


class Remote:
    """A local HTTP server: /ok (JSON), /moved (302 to /ok), /flood (more than asked for)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        remote = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format, *args):  # noqa: A002 - the base class's name
                pass

            def do_GET(self):  # noqa: N802 - the base class's name
                remote.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                if self.path == "/v1.0/ok":
                    body = b'{"id": "x"}'
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                elif self.path == "/v1.0/moved":
                    self.send_response(302)
                    self.send_header("Location", "/v1.0/ok")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif self.path == "/v1.0/flood":
                    self.send_response(200)
                    self.end_headers()  # no length: read until it closes
                    try:
                        for _ in range(1000):
                            self.wfile.write(b"y" * 4096)
                    except OSError:
                        pass
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()

        self._httpd = LoopbackServer(Handler)
        self._httpd.start()
        self.url = self._httpd.url

    def close(self) -> None:
        self._httpd.stop()


@pytest.fixture
def remote():
    server = Remote()
    yield server
    server.close()


def client_of(remote: Remote) -> GraphClient:
    config = dataclasses.replace(
        OneDriveConfig.from_settings(), graph_url=f"{remote.url}/v1.0", timeout=5
    )
    tokens = Tokens("secret-access-token", "refresh", time.time() + 3600)
    return GraphClient(config=config, tokens=lambda stale: tokens)


def test_a_call_that_gets_no_answer_ends_at_its_timeout():
    with silent_server() as port:
        started = time.monotonic()
        with pytest.raises(ProviderError) as hung:
            http_request("GET", f"http://127.0.0.1:{port}/v1.0/me", timeout=0.5)

    assert hung.value.kind == Problem.PROVIDER_UNAVAILABLE
    assert time.monotonic() - started < 3


def test_a_redirect_is_handed_to_the_caller_not_followed(remote):
    answer = client_of(remote).call("GET", f"{remote.url}/v1.0/moved")

    assert (answer.status, answer.headers["location"]) == (302, "/v1.0/ok")
    assert [path for path, _ in remote.requests] == ["/v1.0/moved"]


def test_an_answer_larger_than_expected_is_refused_as_it_is_read(remote):
    with pytest.raises(ProviderError, match="larger than expected"):
        http_request("GET", f"{remote.url}/v1.0/flood", timeout=5, max_bytes=100_000)


def test_the_token_goes_to_graph_alone_with_no_compression_asked_for(remote):
    client = client_of(remote)

    assert client.get_json(f"{remote.url}/v1.0/ok") == {"id": "x"}
    with pytest.raises(ProviderError, match="outside Microsoft Graph"):
        client.call("GET", f"{remote.url}/elsewhere")

    [(path, headers)] = remote.requests
    assert path == "/v1.0/ok" and headers["authorization"] == "Bearer secret-access-token"
    assert headers["accept-encoding"] == "identity"


def test_a_graph_that_cannot_be_reached_is_a_provider_problem():
    with silent_server() as port:
        pass  # closed: nothing listens on the port now

    with pytest.raises(ProviderError, match="Could not reach OneDrive") as refused:
        http_request("GET", f"http://127.0.0.1:{port}/v1.0/me", timeout=5)

    assert refused.value.kind == Problem.PROVIDER_UNAVAILABLE
