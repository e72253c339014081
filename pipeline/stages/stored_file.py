"""Read a document's stored bytes, with storage failures classified once for every stage."""

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import BinaryIO

from botocore.exceptions import BotoCoreError, ClientError

from documents.models import Document
from documents.storage import storage_open
from pipeline.errors import PermanentError, TransientError

MISSING = "The uploaded file is no longer in storage; please upload it again."
MISMATCH = (
    "The stored file does not match the upload (it changed or was damaged); please upload it again."
)


@contextmanager
def open_stored(document: Document) -> Iterator[BinaryIO]:
    """Open the document's bytes. A missing object is permanent; any other storage
    failure (network, S3 errors) is transient."""
    try:
        with storage_open(key=document.storage_key) as fh:
            yield fh
    except FileNotFoundError:
        raise PermanentError(MISSING, code="file_missing") from None
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey"):
            raise PermanentError(MISSING, code="file_missing") from None
        raise TransientError(f"storage error: {exc}", code="storage_unavailable") from exc
    except (BotoCoreError, OSError) as exc:
        raise TransientError(f"storage error: {exc}", code="storage_unavailable") from exc


def verify_stored(document: Document, *, size: int, sha256: str) -> None:
    """The bytes read are the ones accepted (their size and SHA-256 recorded then), or the
    run fails: changed or damaged bytes would give some other document's text."""
    if size != document.size_bytes or sha256 != document.sha256:
        raise PermanentError(MISMATCH, code="file_mismatch")


def read_stored(document: Document) -> bytes:
    """The document's bytes, checked against what was accepted (verify_stored)."""
    with open_stored(document) as fh:
        data = fh.read()
    verify_stored(document, size=len(data), sha256=hashlib.sha256(data).hexdigest())
    return data
