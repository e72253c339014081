"""A webhook receiver on loopback, in the test's process: it records every request and
answers as the test scripts it (a status, a redirect, or no answer for a while)."""

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float


@dataclass
class Script:
    # What to answer, request by request; the last one for every request after.
    answers: list = field(default_factory=lambda: [200])
    received: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_answer(self):
        with self.lock:
            n = len(self.received)
        return self.answers[min(n, len(self.answers) - 1)]


class Hang:
    """An answer that never comes (for `seconds`): the receiver holds the request."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


class Redirect:
    def __init__(self, location: str, status: int = 302) -> None:
        self.location, self.status = location, status


def _handler(script: Script):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            answer = script.next_answer()
            with script.lock:
                script.received.append(
                    Received(
                        self.path,
                        {k.lower(): v for k, v in self.headers.items()},
                        body,
                        time.time(),
                    )
                )
            if isinstance(answer, Hang):
                time.sleep(answer.seconds)
                return
            if isinstance(answer, Redirect):
                self.send_response(answer.status)
                self.send_header("Location", answer.location)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            payload = f"answer {answer}".encode()
            self.send_response(answer)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    return Handler


@contextmanager
def receiver(*answers):
    """A receiver answering `answers` in turn (statuses, Hang, Redirect); yields (url,
    script), the script's `received` growing as requests come."""
    script = Script(list(answers) or [200])
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(script))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", script
    finally:
        server.shutdown()
        server.server_close()
