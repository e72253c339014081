"""OneDrive's pre-authenticated download links are fetched only over HTTPS from
Microsoft's download hosts (PAPERLANE_ONEDRIVE_DOWNLOAD_HOSTS), redirects included,
within a time and a size: against local servers that redirect elsewhere, loop, trickle
or send too much, and through the real store stage against the local Graph."""

import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

import pytest

import config.settings as shipped
from connectors.onedrive_download import MAX_REDIRECTS, download_open, download_refusal
from connectors.sync import connection_sync
from pipeline.errors import PermanentError, TransientError
from pipeline.services.people import run_retry
from pipeline.services.transitions import Actor
from tests.connectors.signers import connected
from tests.support.files import make_pdf
from tests.support.graph_server import graph_fixture
from tests.support.loopback import LoopbackServer
from tests.support.runs import drive

graph = graph_fixture()

PAYLOAD = b"%PDF-1.7 the bytes of a file"


class Remote:
    """A local HTTP server: /ok, /to?url=<target> (302), /loop, /trickle, /stall, /big,
    /endless."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        remote = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format, *args):  # noqa: A002 - the base class's name
                pass

            def do_GET(self):  # noqa: N802 - the base class's name
                remote.requests.append(self.path)
                parsed = urllib.parse.urlsplit(self.path)
                if parsed.path == "/ok":
                    return self._send(PAYLOAD)
                if parsed.path == "/to":
                    target = urllib.parse.parse_qs(parsed.query)["url"][0]
                    return self._redirect(target)
                if parsed.path == "/loop":
                    return self._redirect("/loop")
                if parsed.path == "/trickle":
                    self.send_response(200)
                    self.send_header("Content-Length", "100")
                    self.end_headers()
                    for _ in range(100):
                        self.wfile.write(b"x")
                        self.wfile.flush()
                        time.sleep(0.1)
                    return None
                if parsed.path == "/stall":
                    self.send_response(200)
                    self.send_header("Content-Length", "100")
                    self.end_headers()
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(3)
                    return None
                if parsed.path == "/big":
                    self.send_response(200)
                    self.send_header("Content-Length", str(10**9))
                    self.end_headers()
                    return None
                if parsed.path == "/endless":
                    self.send_response(200)
                    self.end_headers()  # no length: read until it closes
                    try:
                        for _ in range(1000):
                            self.wfile.write(b"y" * 4096)
                    except OSError:
                        pass
                    return None
                self.send_response(404)
                self.end_headers()

            def _send(self, body: bytes) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _redirect(self, target: str) -> None:
                self.send_response(302)
                self.send_header("Location", target)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._httpd = LoopbackServer(Handler)
        self._httpd.start()
        self.port = self._httpd.server_address[1]
        self.url = self._httpd.url

    def close(self) -> None:
        self._httpd.stop()


@pytest.fixture
def remote(settings):
    server = Remote()
    # Only this origin, as the tests' Graph is named; "localhost" is the same server by a
    # name that is not allowed.
    settings.PAPERLANE_ONEDRIVE_DOWNLOAD_HOSTS = [server.url]
    yield server
    server.close()


def read_all(link: str) -> bytes:
    stream = download_open(link, timeout=5)
    assert stream is not None
    with stream:
        return b"".join(iter(lambda: stream.read(65536), b""))


@pytest.mark.parametrize(
    "link",
    [
        "https://contoso-my.sharepoint.com/personal/a/_layouts/15/download.aspx?UniqueId=1",
        "https://public.bn.files.1drv.com/y4mAbC",
        "https://my.microsoftpersonalcontent.com/personal/a/_layouts/15/download.aspx?x=1",
        "https://graph.microsoft.com/v1.0/drives/d/items/i/content",
        "https://CONTOSO.SharePoint.com:443/x",
    ],
)
def test_microsofts_download_hosts_are_allowed_over_https(link, settings):
    settings.PAPERLANE_ONEDRIVE_DOWNLOAD_HOSTS = shipped.PAPERLANE_ONEDRIVE_DOWNLOAD_HOSTS

    assert download_refusal(link) is None


@pytest.mark.parametrize(
    "link, why",
    [
        ("http://contoso-my.sharepoint.com/x", "not HTTPS"),
        ("https://contoso-my.sharepoint.com:8443/x", "not one of Microsoft's download hosts"),
        ("https://sharepoint.com.evil.example/x", "not one of Microsoft's download hosts"),
        ("https://evilsharepoint.com/x", "not one of Microsoft's download hosts"),
        ("https://graph.microsoft.com.evil.example/x", "not one of Microsoft's download hosts"),
        ("https://169.254.169.254/latest/meta-data/", "not one of Microsoft's download hosts"),
        ("https://user:secret@contoso.sharepoint.com/x", "carries credentials"),
        ("file:///etc/passwd", "names no host"),
        ("ftp://public.bn.files.1drv.com/x", "not HTTPS"),
        ("data:text/plain,hello", "names no host"),
    ],
)
def test_any_other_scheme_or_host_is_refused_before_it_is_fetched(link, why, settings):
    settings.PAPERLANE_ONEDRIVE_DOWNLOAD_HOSTS = shipped.PAPERLANE_ONEDRIVE_DOWNLOAD_HOSTS

    assert why in download_refusal(link)
    with pytest.raises(PermanentError) as refused:
        download_open(link, timeout=5)
    assert refused.value.code == "download_refused"


def test_a_named_origin_allows_that_origin_alone(remote):
    assert read_all(f"{remote.url}/ok") == PAYLOAD
    with pytest.raises(PermanentError, match="localhost"):
        download_open(f"http://localhost:{remote.port}/ok", timeout=5)

    assert remote.requests == ["/ok"]


@pytest.mark.parametrize(
    "target",
    [
        "http://localhost:{port}/ok",  # another host
        "https://evil.invalid/steal",  # https, but not Microsoft's
        "file:///etc/passwd",  # another scheme
        "ftp://127.0.0.1:{port}/ok",
    ],
)
def test_a_redirect_off_the_allowed_hosts_is_not_followed(remote, target):
    target = target.format(port=remote.port)
    link = f"{remote.url}/to?{urllib.parse.urlencode({'url': target})}"

    with pytest.raises(PermanentError) as refused:
        download_open(link, timeout=5)

    assert refused.value.code == "download_refused"
    assert remote.requests == [link.removeprefix(remote.url)]  # the target was never asked


def test_a_redirect_to_an_allowed_host_is_followed(remote):
    link = f"{remote.url}/to?{urllib.parse.urlencode({'url': f'{remote.url}/ok'})}"

    assert read_all(link) == PAYLOAD
    assert remote.requests[-1] == "/ok"


def test_a_redirect_loop_ends_after_a_few_redirects(remote):
    with pytest.raises(TransientError):
        download_open(f"{remote.url}/loop", timeout=5)

    assert len(remote.requests) <= MAX_REDIRECTS + 1


def test_a_trickling_download_is_cut_at_the_time_limit(remote, monkeypatch):
    monkeypatch.setattr("connectors.source.DOWNLOAD_SECONDS", 1.0)
    started = time.monotonic()

    with pytest.raises(TransientError) as slow:
        read_all(f"{remote.url}/trickle")

    assert slow.value.code == "download_timeout"
    assert time.monotonic() - started < 3


def test_a_download_that_stops_sending_breaks_off_at_the_read_timeout(remote):
    stream = download_open(f"{remote.url}/stall", timeout=0.5)
    assert stream is not None
    started = time.monotonic()

    with stream, pytest.raises(TransientError) as stalled:
        while stream.read(65536):
            pass

    assert stalled.value.code == "source_unavailable"
    assert time.monotonic() - started < 2


def test_a_download_larger_than_the_limit_is_refused_declared_or_not(remote, settings):
    settings.PAPERLANE_MAX_UPLOAD_BYTES = 100_000

    with pytest.raises(PermanentError) as declared:
        download_open(f"{remote.url}/big", timeout=5)
    with pytest.raises(PermanentError) as undeclared:
        read_all(f"{remote.url}/endless")

    assert declared.value.code == undeclared.value.code == "file_too_large"


@pytest.mark.django_db(transaction=True)
def test_the_store_stage_refuses_a_graph_download_link_off_the_allowed_hosts(graph, org):
    graph.put("Contracts/a.pdf", make_pdf(1))
    connection = connected(graph, org)
    [run_id] = connection_sync(connection=connection).counts.run_ids
    # Graph hands out links to itself by a name the settings do not allow.
    graph.state.download_origin = graph.url.replace("127.0.0.1", "localhost")

    run = drive(run_id)

    assert (run.status, run.error_code) == ("failed", "download_refused")
    assert "localhost" in run.error_message
    assert not [p for _, p in graph.state.requests if p.startswith("/download/")]
    graph.state.download_origin = ""

    run_retry(run=run, actor=Actor("user:test"))
    assert drive(run_id).status == "succeeded"
