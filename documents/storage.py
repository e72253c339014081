"""Where document bytes live. Keys are stable: derived from ids, never from names."""

import uuid
from typing import BinaryIO

from django.core.files.storage import default_storage

_EXTENSIONS = {"pdf": "pdf", "docx": "docx"}


def document_storage_key(
    *, organisation_id: int, document_id: uuid.UUID, version: int, kind: str
) -> str:
    return f"orgs/{organisation_id}/documents/{document_id}/v{version}/original.{_EXTENSIONS[kind]}"


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
