"""Uploads to POST /api/v1/documents over keep-alive connections.

UploadClient is one connection; from_clients shares work among a pool of them;
upload_all and upload_paced send a set of PDFs in a burst or at a steady pace.
"""

import http.client
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TypeVar
from urllib.parse import urlsplit

import _common  # noqa: F401  (puts the project root on sys.path for `tests`)

from tests.support.files import multipart_body

Item = TypeVar("Item")
Result = TypeVar("Result")


class UploadClient:
    """One keep-alive HTTP connection posting documents to the API.

    The connection is opened on first use and dropped after a transport error, so the
    next request opens a new one.
    """

    def __init__(self, base: str, token: str, *, timeout: float = 60) -> None:
        self.address = urlsplit(base)
        self.token = token
        self.timeout = timeout
        self.conn: http.client.HTTPConnection | None = None

    def post(self, body: bytes, content_type: str) -> tuple[int, bytes]:
        """POST one multipart body; (HTTP status or 0 on a transport error, response body)."""
        status, _, payload = self.send(body, content_type)
        return status, payload

    def send(self, body: bytes, content_type: str) -> tuple[int, str | None, bytes]:
        """POST one multipart body; (HTTP status or 0 on a transport error, Retry-After,
        response body)."""
        if self.conn is None:
            self.conn = http.client.HTTPConnection(
                self.address.hostname, self.address.port, timeout=self.timeout
            )
        try:
            self.conn.request(
                "POST",
                "/api/v1/documents",
                body=body,
                headers={"Authorization": f"Bearer {self.token}", "Content-Type": content_type},
            )
            response = self.conn.getresponse()
            return response.status, response.getheader("Retry-After"), response.read()
        except (OSError, http.client.HTTPException):
            self.conn.close()
            self.conn = None
            return 0, None, b""

    def upload(self, name: str, pdf: bytes) -> tuple[int, str | None]:
        """POST one PDF; (HTTP status or 0 on a transport error, run id if accepted)."""
        status, payload = self.post(*multipart_body(name, pdf))
        return status, json.loads(payload)["run_id"] if status == 202 else None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def from_clients(
    base: str,
    token: str,
    clients: int,
    items: Iterable[Item],
    send: Callable[[UploadClient, Item], Result],
    *,
    timeout: float = 60,
) -> list[Result]:
    """`send(client, item)` for every item, shared among `clients` threads.

    Each thread has its own UploadClient and takes the next item as soon as it is done
    with the last; returns what `send` returned, in the order the calls finished.
    """
    lock = threading.Lock()
    pending = iter(items)
    results: list[Result] = []

    def client_loop() -> None:
        client = UploadClient(base, token, timeout=timeout)
        try:
            while True:
                with lock:
                    item = next(pending, None)
                if item is None:
                    return
                result = send(client, item)
                with lock:
                    results.append(result)
        finally:
            client.close()

    with ThreadPoolExecutor(max_workers=clients) as pool:
        for _ in range(clients):
            pool.submit(client_loop)
    return results


def upload_all(
    base: str, token: str, pdfs: list[bytes], clients: int
) -> tuple[list[str], dict[int, int], datetime, float]:
    """POST every PDF from `clients` threads.

    Returns run ids, status counts, when the first upload was sent and seconds taken.
    """

    def send(client: UploadClient, item: tuple[int, bytes]) -> tuple[int, str | None]:
        number, pdf = item
        return client.upload(f"bench-{number}.pdf", pdf)

    first_upload = datetime.now(UTC)
    started = time.monotonic()
    results = from_clients(base, token, clients, enumerate(pdfs), send)
    elapsed = time.monotonic() - started
    run_ids = [run_id for _, run_id in results if run_id is not None]
    return run_ids, Counter(status for status, _ in results), first_upload, elapsed


def upload_paced(
    base: str, token: str, pdfs: list[bytes], rate: float
) -> tuple[list[str], dict[int, int], float]:
    """POST the PDFs one at a time, the i-th at start + i/rate.

    Returns run ids, status counts and seconds from the first send to the last.
    """
    client = UploadClient(base, token)
    run_ids: list[str] = []
    statuses: Counter[int] = Counter()
    started = last_sent = time.monotonic()
    try:
        for number, pdf in enumerate(pdfs):
            time.sleep(max(0.0, started + number / rate - time.monotonic()))
            last_sent = time.monotonic()
            status, run_id = client.upload(f"paced-{number}.pdf", pdf)
            statuses[status] += 1
            if run_id is not None:
                run_ids.append(run_id)
    finally:
        client.close()
    return run_ids, statuses, last_sent - started
