"""Documents stored in S3: moto's S3 server on a loopback port, a bucket of its own."""

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

import boto3
from django.core.files.storage import storages
from moto.server import ThreadedMotoServer

from tests.support.processes import free_port

CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextmanager
def moto_s3(settings, monkeypatch) -> Iterator[SimpleNamespace]:
    """Point the default storage at a fresh bucket of a moto server. Yields `client` (boto3,
    straight to the bucket), `bucket`, and `env`: what a child process (run_workers)
    needs in its environment to use the same bucket."""
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
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
        server.stop()


def bucket_keys(s3) -> list[str]:
    """Every key in the test's bucket."""
    listing = s3.client.list_objects_v2(Bucket=s3.bucket)
    return sorted(o["Key"] for o in listing.get("Contents", []))


def storage_reopened(settings) -> None:
    """Make the default storage anew from the settings as they are now (an endpoint or a
    client configuration changed): setting STORAGES resets every storage Django holds."""
    settings.STORAGES = dict(settings.STORAGES)
