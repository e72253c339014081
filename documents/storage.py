"""Where document bytes live. Keys are stable: derived from ids, never from names."""

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import BinaryIO

from django.core.files.storage import default_storage

_EXTENSIONS = {"pdf": "pdf", "docx": "docx"}
# Every document key starts with this folder.
KEYS_ROOT = "orgs"
_KEY = re.compile(
    rf"{KEYS_ROOT}/(?P<organisation_id>[0-9]+)/documents/(?P<document_id>[0-9a-f-]{{36}})"
    r"/v(?P<version>[0-9]+)/original\.(?P<kind>[a-z]+)"
)


@dataclass(frozen=True)
class DocumentKey:
    key: str
    organisation_id: int
    document_id: uuid.UUID
    version: int


def document_storage_key(
    *, organisation_id: int, document_id: uuid.UUID, version: int, kind: str
) -> str:
    return (
        f"{KEYS_ROOT}/{organisation_id}/documents/{document_id}"
        f"/v{version}/original.{_EXTENSIONS[kind]}"
    )


def document_key_parse(key: str) -> DocumentKey | None:
    """The ids in a key `document_storage_key` made, or None for any other key."""
    match = _KEY.fullmatch(key)
    if match is None or match["kind"] not in _EXTENSIONS:
        return None
    try:
        parsed = DocumentKey(
            key=key,
            organisation_id=int(match["organisation_id"]),
            document_id=uuid.UUID(match["document_id"]),
            version=int(match["version"]),
        )
    except ValueError:
        return None
    # Only the exact spelling we write counts (no leading zeros, hyphens misplaced, …).
    rebuilt = document_storage_key(
        organisation_id=parsed.organisation_id,
        document_id=parsed.document_id,
        version=parsed.version,
        kind=match["kind"],
    )
    return parsed if rebuilt == key else None


def storage_put(*, key: str, content: BinaryIO) -> None:
    content.seek(0)
    saved = default_storage.save(key, content)
    if saved != key:  # a storage that renames would break the stable key
        default_storage.delete(saved)
        raise RuntimeError(f"storage wrote {saved!r} instead of {key!r}")


def storage_delete(*, key: str) -> None:
    default_storage.delete(key)


def storage_exists(*, key: str) -> bool:
    return default_storage.exists(key)


def storage_open(*, key: str) -> BinaryIO:
    return default_storage.open(key, "rb")


def stored_keys(*, under: str) -> Iterator[str]:
    """Every stored key below the folder `under`, folder by folder in name order.

    Only `listdir` is used, so this works on FileSystemStorage and on S3Storage
    (one LIST per folder there). Keys are yielded lazily: a caller that stops
    early does not list the rest.
    """
    folders, files = _listdir(under)
    for name in sorted(files):
        yield f"{under}/{name}"
    for name in sorted(folders):
        yield from stored_keys(under=f"{under}/{name}")


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
