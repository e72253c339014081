"""Where document bytes live. Keys are stable: derived from ids, never from names."""

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import BinaryIO

from botocore.exceptions import BotoCoreError, ClientError
from django.core.files.storage import default_storage

from formats.base import MEDIA_TYPES

# Every document key starts with this folder.
KEYS_ROOT = "orgs"
_KEY = re.compile(
    rf"{KEYS_ROOT}/(?P<organisation_id>[0-9]+)/documents/(?P<document_id>[0-9a-f-]{{36}})"
    r"/v(?P<version>[0-9]+)(?:/(?P<write>[0-9a-f]{32}))?/original\.(?P<kind>[a-z]+)"
)


@dataclass(frozen=True)
class DocumentKey:
    key: str
    organisation_id: int
    document_id: uuid.UUID
    version: int
    # The write's own id in a key that one write alone uses (see document_write_key).
    write: str = ""


def document_folder(*, organisation_id: int, document_id: uuid.UUID) -> str:
    """The folder every stored version of one document lives under."""
    return f"{KEYS_ROOT}/{organisation_id}/documents/{document_id}"


def document_storage_key(
    *, organisation_id: int, document_id: uuid.UUID, version: int, kind: str, write: str = ""
) -> str:
    folder = f"v{version}/{write}" if write else f"v{version}"
    base = document_folder(organisation_id=organisation_id, document_id=document_id)
    return f"{base}/{folder}/original.{kind}"


def document_write_key(
    *, organisation_id: int, document_id: uuid.UUID, version: int, kind: str
) -> str:
    """A key no other write uses: for bytes that become the document's version only if
    the transaction that points the document at them commits (a connector's store).
    Two writers never share one, so neither deletes nor overwrites the other's bytes;
    a key left unpointed (the loser of a race, a worker killed before its commit) is
    removed by the orphan sweep."""
    return document_storage_key(
        organisation_id=organisation_id,
        document_id=document_id,
        version=version,
        kind=kind,
        write=uuid.uuid4().hex,
    )


def document_key_parse(key: str) -> DocumentKey | None:
    """The ids in a key `document_storage_key` made, or None for any other key."""
    match = _KEY.fullmatch(key)
    if match is None or match["kind"] not in MEDIA_TYPES:
        return None
    try:
        parsed = DocumentKey(
            key=key,
            organisation_id=int(match["organisation_id"]),
            document_id=uuid.UUID(match["document_id"]),
            version=int(match["version"]),
            write=match["write"] or "",
        )
    except ValueError:
        return None
    # Only the exact spelling we write counts (no leading zeros, hyphens misplaced, …).
    rebuilt = document_storage_key(
        organisation_id=parsed.organisation_id,
        document_id=parsed.document_id,
        version=parsed.version,
        kind=match["kind"],
        write=parsed.write,
    )
    return parsed if rebuilt == key else None


# What a store that is down, slow past its timeouts or refusing raises: S3 (through
# botocore) or a local disk (full, read-only, gone).
STORAGE_ERRORS = (BotoCoreError, ClientError, OSError)
# How long a client is asked to wait before sending again a request the store failed.
STORAGE_RETRY_AFTER_SECONDS = 60


def storage_put(*, key: str, content: BinaryIO) -> None:
    content.seek(0)
    saved = default_storage.save(key, content)
    if saved != key:  # a storage that renames would break the stable key
        default_storage.delete(saved)
        raise RuntimeError(f"storage wrote {saved!r} instead of {key!r}")


def storage_delete(*, key: str) -> None:
    default_storage.delete(key)


def storage_open(*, key: str) -> BinaryIO:
    return default_storage.open(key, "rb")


@dataclass(frozen=True)
class StoredStream:
    """Stored bytes to read from start to end, a block at a time; close it when done."""

    size: int
    file: BinaryIO


# What S3 (and stores that speak its API) answers for an object that is not there.
_S3_MISSING = {"404", "NoSuchKey", "NotFound"}


def s3_missing(exc: ClientError) -> bool:
    """Whether an S3 client error says there is no object at the key."""
    return exc.response.get("Error", {}).get("Code") in _S3_MISSING


def s3_object(key: str) -> tuple[object, str, str]:
    """(boto3 client, bucket, object name) of `key` in the default S3 storage, for calls
    django-storages does not make: streaming, HEAD, ranged reads, presigning."""
    return (
        default_storage.connection.meta.client,
        default_storage.bucket_name,
        default_storage._normalize_name(key),
    )


def storage_stream(*, key: str) -> StoredStream:
    """The bytes at `key`, read from the store as they are consumed, never held whole
    (django-storages' S3 file would download the object into memory first).
    FileNotFoundError when nothing is stored there; one of STORAGE_ERRORS when the
    store fails."""
    if not is_s3(default_storage):
        file = default_storage.open(key, "rb")
        return StoredStream(size=file.size, file=file)
    client, bucket, name = s3_object(key)
    try:
        answer = client.get_object(Bucket=bucket, Key=name)
    except ClientError as exc:
        if s3_missing(exc):
            raise FileNotFoundError(key) from exc
        raise
    return StoredStream(size=answer["ContentLength"], file=answer["Body"])


def stored_keys(*, under: str, after: str = "") -> Iterator[str]:
    """Every stored key below the folder `under`, in the order of the keys as strings,
    starting after the key `after` (a resume point: it need not exist any more).

    Keys are yielded lazily: a caller that stops early does not list the rest. On S3
    the bucket is listed flat from `after` on, one LIST request per 1,000 keys; any
    other storage is walked folder by folder with `listdir`, skipping the folders
    whose keys all sort before `after`.
    """
    if is_s3(default_storage):
        yield from _s3_keys(default_storage, under=under, after=after)
    else:
        yield from _walked_keys(under=under, after=after)


def is_s3(storage) -> bool:
    """True when `storage` is django-storages' S3 backend."""
    try:
        from storages.backends.s3 import S3Storage
    except ImportError:  # django-storages (or boto3) not installed: no S3 here
        return False
    return isinstance(storage, S3Storage)


def _s3_keys(storage, *, under: str, after: str) -> Iterator[str]:
    # Keys in the bucket carry the storage's location (AWS_LOCATION) in front.
    location = f"{storage.location.strip('/')}/" if storage.location.strip("/") else ""
    prefix = storage._normalize_name(under).rstrip("/") + "/"
    start = {"StartAfter": storage._normalize_name(after)} if after else {}
    pages = storage.connection.meta.client.get_paginator("list_objects_v2").paginate(
        Bucket=storage.bucket_name, Prefix=prefix, **start
    )
    for page in pages:
        for entry in page.get("Contents", ()):
            yield entry["Key"][len(location) :]


def _walked_keys(*, under: str, after: str) -> Iterator[str]:
    folders, files = _listdir(under)
    # As strings, the keys in a folder "x" all sort as "x/" would among the file names.
    entries = sorted([(f"{name}/", True) for name in folders] + [(n, False) for n in files])
    for name, is_folder in entries:
        key = f"{under}/{name}"
        if not is_folder:
            if key > after:
                yield key
        elif key > after or after.startswith(key):  # some of its keys sort after `after`
            yield from _walked_keys(under=key.rstrip("/"), after=after)


def _listdir(folder: str) -> tuple[list[str], list[str]]:
    try:
        return default_storage.listdir(folder)
    except FileNotFoundError:  # a local folder that was never made or was just removed
        return [], []


def storage_modified_at(*, key: str) -> datetime | None:
    """When the key was last written (aware), or None if it is gone.

    Asked per key rather than while listing: on S3 each answer is a HEAD request.
    """
    try:
        return default_storage.get_modified_time(key)
    except FileNotFoundError:
        return None
