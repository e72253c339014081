"""S3's part of direct uploads: a presigned PUT, a HEAD, and a bounded read of the object.

Only an S3 storage can hand a client a URL to write to; `presigned_supported` says
whether this deployment's storage is one. Keys are the storage's names (as
`documents.storage` uses them); the bucket's own keys carry AWS_LOCATION in front.
"""

import copy
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass
from typing import BinaryIO

from botocore.config import Config
from botocore.exceptions import ClientError
from django.conf import settings
from django.core.files.storage import default_storage, storages

from documents.storage import is_s3, s3_missing, s3_object

# Small enough that a slow S3 has its time budget looked at every few hundred KiB.
READ_BLOCK = 256 * 1024
# What a missing object is called, by S3 and by its look-alikes.

# One signing client per storage: building one costs milliseconds of CPU on every request.
# Keyed by the storage itself, never by the `default_storage` proxy: the proxy hashes and
# compares as whatever it wraps now, so a new storage at a freed one's address would find
# the freed one's client and its endpoint.
_signers: "weakref.WeakKeyDictionary[object, object]" = weakref.WeakKeyDictionary()
_signers_lock = threading.Lock()


@dataclass(frozen=True)
class PresignedPut:
    url: str
    # Every header the PUT must send as given: they are part of the signature.
    headers: dict[str, str]


def presigned_supported() -> bool:
    """True when documents are stored in S3, the only storage a client can PUT to."""
    return is_s3(default_storage)


def _signer(storage):
    """A client of the storage's bucket that signs with SigV4, whatever the storage's own
    configuration: only SigV4 binds the headers (length, type, If-None-Match) to the URL."""
    with _signers_lock:
        client = _signers.get(storage)
        if client is None:
            client = storage._create_session().client(
                "s3",
                region_name=storage.region_name,
                use_ssl=storage.use_ssl,
                endpoint_url=storage.endpoint_url,
                # A copy: making a client rewrites its configuration's retries in place.
                config=copy.deepcopy(storage.client_config).merge(Config(signature_version="s3v4")),
                verify=storage.verify,
            )
            _signers[storage] = client
        return client


def presigned_get(*, key: str, content_type: str, disposition: str, seconds: int) -> str:
    """A URL that serves the object at `key` for `seconds`, with the given Content-Type and
    Content-Disposition and no caching: a download straight from S3, holding no web
    thread while a slow client reads. Signing is local: no request is made."""
    storage = storages["default"]
    return _signer(storage).generate_presigned_url(
        "get_object",
        Params={
            "Bucket": storage.bucket_name,
            "Key": storage._normalize_name(key),
            "ResponseContentType": content_type,
            "ResponseContentDisposition": disposition,
            "ResponseCacheControl": "private, no-store",
        },
        ExpiresIn=seconds,
        HttpMethod="GET",
    )


def presigned_put(*, key: str, size_bytes: int, content_type: str, seconds: int) -> PresignedPut:
    """A URL that takes one PUT of exactly `size_bytes` bytes of `content_type` to `key`
    for `seconds`, and only while nothing is stored there: it cannot replace the bytes
    once they are written (If-None-Match), so a document's bytes stay the ones checked.
    Signing is local: no request is made."""
    storage = storages["default"]
    headers = {
        "Content-Type": content_type,
        "Content-Length": str(size_bytes),
        "If-None-Match": "*",
    }
    url = _signer(storage).generate_presigned_url(
        "put_object",
        Params={
            "Bucket": storage.bucket_name,
            "Key": storage._normalize_name(key),
            "ContentType": content_type,
            "ContentLength": size_bytes,
            "IfNoneMatch": "*",
        },
        ExpiresIn=seconds,
        HttpMethod="PUT",
    )
    return PresignedPut(url=url, headers=headers)


def stored_size(*, key: str) -> int | None:
    """The size of the object at `key` (one HEAD request), or None if there is none.
    Any other storage failure raises (botocore's errors)."""
    client, bucket, name = s3_object(key)
    try:
        head = client.head_object(Bucket=bucket, Key=name)
    except ClientError as exc:
        if s3_missing(exc):
            return None
        raise
    return int(head["ContentLength"])


def stored_read(*, key: str, max_bytes: int, seconds: float) -> BinaryIO:
    """The object's bytes, but never more than `max_bytes` + 1 of them (a caller sees that
    it is larger), spooled to a temporary file past FILE_UPLOAD_MAX_MEMORY_SIZE, as an
    upload is. Raises TimeoutError if reading takes longer than `seconds`, FileNotFoundError
    if the object is gone, botocore's errors for any other failure."""
    client, bucket, name = s3_object(key)
    try:
        # The range bounds what S3 sends, whatever the object has become since it was looked at.
        body = client.get_object(Bucket=bucket, Key=name, Range=f"bytes=0-{max_bytes}")["Body"]
    except ClientError as exc:
        if s3_missing(exc):
            raise FileNotFoundError(key) from None
        raise
    spooled = tempfile.SpooledTemporaryFile(max_size=settings.FILE_UPLOAD_MAX_MEMORY_SIZE)
    deadline = time.monotonic() + seconds
    try:
        with body:
            read = 0
            while read <= max_bytes and (block := body.read(READ_BLOCK)):
                spooled.write(block)
                read += len(block)
                if time.monotonic() > deadline:
                    raise TimeoutError(f"reading {key} took longer than {seconds:g} s")
    except BaseException:
        spooled.close()
        raise
    spooled.seek(0)
    return spooled
