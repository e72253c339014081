"""Stored keys for the listing tests, local and S3, and whether a key is stored."""

import io

from django.core.files.storage import default_storage

from documents.storage import storage_put

# Names whose order as keys differs from a folder-by-folder walk's: "a-b" and "a0" sort
# around the folder "a" ("a/..."), and "a/z" after the files deeper in "a".
KEYS = ["top/a-b", "top/a/b/c", "top/a/b/d", "top/a/z", "top/a0", "top/b/c"]


def store_keys(keys: list[str]) -> None:
    for key in reversed(keys):
        storage_put(key=key, content=io.BytesIO(b"x"))


def storage_exists(*, key: str) -> bool:
    """Whether the storage holds `key` (the application never needs to ask)."""
    return default_storage.exists(key)
