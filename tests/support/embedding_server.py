"""A local OpenAI-compatible `/v1/embeddings` server for the HTTP provider's tests.

A threaded HTTP server on 127.0.0.1 that answers the way hosted providers do: vectors
(the local hashing embedder's, so a test can compute what it expects), and on demand,
one request at a time in the order they arrive, `429` with `Retry-After`, `5xx`, an
answer slower than the client's timeout, `401`, `404`; one answer to every request until
told otherwise (an outage); a 500 to every input holding a given word (a poison); a key
it checks; and a longest input beyond which it answers OpenAI's context-length `400`. It
records each request when it arrives (time, inputs, status) and the most requests it ever
had in flight.
"""

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from retrieval.embedding import HashingEmbedder
from tests.support.loopback import LoopbackServer


@dataclass
class Answer:
    """One scripted answer: a status with a body and headers, after `delay` seconds."""

    status: int = 200
    body: dict | None = None
    headers: dict = field(default_factory=dict)
    delay: float = 0.0


def busy(retry_after: str) -> Answer:
    return Answer(429, {"error": {"message": "Rate limit reached"}}, {"Retry-After": retry_after})


def failing(status: int = 500) -> Answer:
    return Answer(status, {"error": {"message": "The server had an error"}})


def slow(seconds: float) -> Answer:
    """A correct answer that comes after `seconds`."""
    return Answer(200, None, {}, seconds)


@dataclass
class Request:
    at: float  # time.monotonic() when it arrived
    inputs: list[str]
    status: int = 0
    model: str = ""
    path: str = ""
    dimensions: int | None = None  # as the request asked, if it did


class EmbeddingServer:
    def __init__(self, *, dimensions: int = 32) -> None:
        self.dimensions = dimensions
        self.embedder = HashingEmbedder(dimensions=dimensions)
        self.script: list[Answer] = []
        self.key: str | None = None  # the key a request must carry, when set
        self.models: set[str] | None = None  # the models it serves, when set
        self.max_input_chars: int | None = None
        self.requests: list[Request] = []
        # While set, every request is answered with it, until `recover()` (an outage).
        self.outage: Answer | None = None
        # Inputs holding one of these words are refused with a 500 every time (a poison).
        self.poison: set[str] = set()
        self.in_flight = 0
        self.most_in_flight = 0
        self._lock = threading.Lock()
        self._server = LoopbackServer(self._handler())
        self.url = f"{self._server.url}/v1/embeddings"

    def __enter__(self) -> "EmbeddingServer":
        self._server.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.stop()

    def fail_until_told(self, answer: Answer) -> None:
        """Answer every request with `answer` (e.g. `failing(503)`, or `slow(s)` past the
        client's timeout) until `recover()`."""
        with self._lock:
            self.outage = answer

    def recover(self) -> float:
        """End the outage; returns when (time.monotonic())."""
        with self._lock:
            self.outage = None
            return time.monotonic()

    def answered(self, status: int = 200) -> list[Request]:
        return [r for r in self.requests if r.status == status]

    def _next(self, request: Request, auth: str) -> Answer:
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            if self.key is not None and auth != f"Bearer {self.key}":
                return Answer(401, {"error": {"message": "Incorrect API key provided"}})
            if self.script:
                return self.script.pop(0)
            if self.outage is not None:
                return self.outage
        if any(word in text for word in self.poison for text in request.inputs):
            return failing(500)
        if self.models is not None and request.model not in self.models:
            missing = f"The model `{request.model}` does not exist"
            return Answer(404, {"error": {"message": missing}})
        longest = max(len(text) for text in request.inputs)
        if self.max_input_chars is not None and longest > self.max_input_chars:
            message = (
                f"This model's maximum context length is {self.max_input_chars // 4} tokens, "
                f"however you requested {longest // 4} tokens. Please reduce your input."
            )
            return Answer(400, {"error": {"message": message, "code": "context_length_exceeded"}})
        return Answer()

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                arrived = time.monotonic()
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                request = Request(
                    arrived,
                    list(payload["input"]),
                    model=payload.get("model", ""),
                    path=self.path,
                    dimensions=payload.get("dimensions"),
                )
                counted = True
                try:
                    answer = server._next(request, self.headers.get("Authorization", ""))
                    time.sleep(answer.delay)
                    body = answer.body
                    if answer.status == 200 and body is None:
                        vectors = server.embedder.embed(request.inputs)
                        body = {
                            "object": "list",
                            "model": request.model,
                            "data": [
                                {"object": "embedding", "index": i, "embedding": v}
                                for i, v in enumerate(vectors)
                            ],
                            "usage": {"prompt_tokens": 1, "total_tokens": 1},
                        }
                    request.status = answer.status
                    data = json.dumps(body).encode()
                    # No longer in flight before the client can read the answer: it may
                    # send its next request the moment it has.
                    with server._lock:
                        server.in_flight -= 1
                    counted = False
                    self.send_response(answer.status)
                    for name, value in answer.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (its timeout)
                finally:
                    if counted:
                        with server._lock:
                            server.in_flight -= 1

        return Handler


def most_in_any_window(times: list[float], window: float) -> int:
    """The most of `times` that fall within any interval `window` long."""
    times = sorted(times)
    most, first = 0, 0
    for last, at in enumerate(times):
        while at - times[first] >= window:
            first += 1
        most = max(most, last - first + 1)
    return most
