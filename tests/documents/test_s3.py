"""S3's part of direct uploads (documents/s3.py), against moto's S3 server."""

import pytest

from documents.s3 import presigned_put, presigned_supported, stored_read, stored_size
from tests.support.s3 import storage_reopened

PDF = "application/pdf"


def store(s3, key: str, data: bytes) -> None:
    s3.client.put_object(Bucket=s3.bucket, Key=key, Body=data)


def test_presigned_uploads_are_supported_on_s3_only(s3, settings):
    assert presigned_supported()
    settings.STORAGES = {
        **settings.STORAGES,
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    }
    assert not presigned_supported()


def test_the_size_of_an_object_and_of_none(s3):
    store(s3, "orgs/1/a", b"x" * 1234)

    assert stored_size(key="orgs/1/a") == 1234
    assert stored_size(key="orgs/1/missing") is None


def test_a_read_takes_at_most_one_byte_more_than_asked(s3):
    store(s3, "orgs/1/big", bytes(range(256)) * 4000)

    with stored_read(key="orgs/1/big", max_bytes=1000, seconds=5) as content:
        assert content.read() == (bytes(range(256)) * 4)[:1001]


def test_a_read_past_its_time_is_a_timeout(s3):
    store(s3, "orgs/1/big", b"x" * 3_000_000)

    with pytest.raises(TimeoutError):
        stored_read(key="orgs/1/big", max_bytes=3_000_000, seconds=0)


def test_reading_a_missing_object_is_file_not_found(s3):
    with pytest.raises(FileNotFoundError):
        stored_read(key="orgs/1/missing", max_bytes=10, seconds=5)


def test_signing_leaves_the_configured_s3_budget_as_it_is(s3, settings):
    configured = settings.AWS_S3_CLIENT_CONFIG.retries.copy()

    presigned_put(key="orgs/1/a.pdf", size_bytes=10, content_type="application/pdf", seconds=60)

    assert settings.AWS_S3_CLIENT_CONFIG.retries == configured


def test_a_url_is_signed_for_the_storage_configured_now(s3, settings):
    # Each test gets a fresh storage, often at the address a freed one had: a signer kept
    # for the old storage would send the client to a server that is gone.
    for port in range(40001, 40004):
        settings.AWS_S3_ENDPOINT_URL = f"http://127.0.0.1:{port}"
        storage_reopened(settings)

        grant = presigned_put(key="orgs/1/a.pdf", size_bytes=10, content_type=PDF, seconds=60)

        assert grant.url.startswith(f"http://127.0.0.1:{port}/"), grant.url
