"""Documents stored in S3: moto's S3 server on a loopback port, a bucket of its own."""

import functools
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from types import SimpleNamespace

import boto3
import httpx
from django.core.files.storage import storages
from moto.server import ThreadedMotoServer

from tests.support.processes import free_port

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextmanager
def s3_storage(settings, monkeypatch, *, own_process: bool = False) -> Iterator[SimpleNamespace]:
    """Point the default storage at a fresh bucket of a moto server. Yields `client` (boto3,
    straight to the bucket), `bucket`, and `env`: what a child process (run_workers)
    needs in its environment to use the same bucket. The server runs in a thread of the
    test process, or with `own_process` in a process of its own (a test that measures
    this process's memory then measures only the client's side)."""
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    with _moto_process() if own_process else nullcontext(_moto_in_thread()) as endpoint:
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        # moto keeps one in-memory backend per process: a bucket of our own per test.
        bucket = f"paperlane-test-{uuid.uuid4().hex[:12]}"
        client.create_bucket(Bucket=bucket)
        settings.AWS_STORAGE_BUCKET_NAME = bucket
        settings.AWS_S3_ENDPOINT_URL = endpoint
        settings.AWS_S3_FILE_OVERWRITE = True
        settings.STORAGES = {
            **settings.STORAGES,
            "default": {"BACKEND": "storages.backends.s3.S3Storage"},
        }
        storages._storages.pop("default", None)
        env = {**CREDENTIALS, "AWS_STORAGE_BUCKET_NAME": bucket, "AWS_S3_ENDPOINT_URL": endpoint}
        try:
            yield SimpleNamespace(client=client, bucket=bucket, env=env)
        finally:
            storages._storages.pop("default", None)


@functools.cache
def _moto_in_thread() -> str:
    """The endpoint of moto's S3 server in a daemon thread of this process: started by the
    first test that asks, it serves every later one, each in a bucket of its own (a server
    per test cost a start and half a second to stop)."""
    port = free_port()
    ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False).start()
    return f"http://127.0.0.1:{port}"


@contextmanager
def _moto_process() -> Iterator[str]:
    port = free_port()
    command = [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1"]
    process = subprocess.Popen(
        [*command, "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/moto-api/", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto's server did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


def bucket_keys(s3) -> list[str]:
    """Every key in the test's bucket."""
    listing = s3.client.list_objects_v2(Bucket=s3.bucket)
    return sorted(o["Key"] for o in listing.get("Contents", []))


def storage_reopened(settings) -> None:
    """Make the default storage anew from the settings as they are now (an endpoint or a
    client configuration changed): setting STORAGES resets every storage Django holds."""
    settings.STORAGES = dict(settings.STORAGES)
