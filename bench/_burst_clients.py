"""The burst's clients: threads with one HTTP connection each, honouring 429 + Retry-After."""

import json
import threading
import time
from collections import deque
from dataclasses import dataclass

from _burst_corpus import Upload
from _http import UploadClient

from tests.support.files import multipart_body

MAX_TRIES = 6  # sends of one upload refused with 429, at most
RETRY_AFTER_CAP = 60.0  # seconds; a longer Retry-After is waited for this long


@dataclass
class Request:
    number: int  # the upload's number
    pages: int
    status: int
    ms: float
    at: float  # seconds since the burst began, when it was sent


@dataclass
class Outcome:
    upload: Upload
    status: int  # of the last send
    run_id: str | None
    tries: int


def retry_after_seconds(value: str | None) -> float:
    try:
        return min(max(float(value or 1), 0.0), RETRY_AFTER_CAP)
    except ValueError:
        return 1.0  # an HTTP date or garbage: try again soon, still bounded by MAX_TRIES


def send_all(
    base: str, tokens: dict[str, str], uploads: list[Upload], clients: int, origin: float,
    stop: threading.Event,
) -> tuple[list[Request], list[Outcome]]:  # fmt: skip
    """Every upload, from `clients` threads started together; each client belongs to one
    organisation and sends that organisation's documents one after another."""
    queues = {org: deque(u for u in uploads if u.organisation == org) for org in tokens}
    orgs = sorted(tokens)
    lock = threading.Lock()
    requests: list[Request] = []
    outcomes: list[Outcome] = []
    start = threading.Barrier(clients + 1)

    def client_loop(index: int) -> None:
        org = orgs[index % len(orgs)]
        client = UploadClient(base, tokens[org])
        try:
            start.wait(timeout=60)
            while not stop.is_set():
                with lock:
                    upload = queues[org].popleft() if queues[org] else None
                if upload is None:
                    return
                body, content_type = multipart_body(upload.filename, upload.path.read_bytes())
                for tries in range(1, MAX_TRIES + 1):
                    sent = time.perf_counter()
                    status, retry_after, payload = client.send(body, content_type)
                    ms = (time.perf_counter() - sent) * 1000
                    with lock:
                        requests.append(
                            Request(upload.number, upload.pages, status, ms, sent - origin)
                        )
                    if (
                        status != 429
                        or tries == MAX_TRIES
                        or stop.wait(retry_after_seconds(retry_after))
                    ):
                        break
                run_id = json.loads(payload)["run_id"] if status == 202 else None
                with lock:
                    outcomes.append(Outcome(upload, status, run_id, tries))
        finally:
            client.close()

    threads = [
        threading.Thread(target=client_loop, args=(i,), daemon=True, name=f"client-{i}")
        for i in range(clients)
    ]
    for thread in threads:
        thread.start()
    start.wait(timeout=60)
    for thread in threads:
        while thread.is_alive():
            thread.join(timeout=0.5)  # short joins: Ctrl-C reaches the main thread
    return requests, outcomes
