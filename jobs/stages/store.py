"""store: make sure the bytes are at the document's stable key and are the ones accepted."""

import hashlib

from botocore.exceptions import BotoCoreError, ClientError

from documents.storage import storage_open
from jobs.errors import PermanentError, TransientError


def run(ctx) -> None:
    document = ctx.document
    digest, size = hashlib.sha256(), 0
    try:
        with storage_open(key=document.storage_key) as fh:
            while block := fh.read(1024 * 1024):
                digest.update(block)
                size += len(block)
    except FileNotFoundError:
        raise PermanentError(
            "The uploaded file is no longer in storage; please upload it again.",
            code="file_missing",
        ) from None
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey"):
            raise PermanentError(
                "The uploaded file is no longer in storage; please upload it again.",
                code="file_missing",
            ) from None
        raise TransientError(f"storage error: {exc}", code="storage_unavailable") from exc
    except (BotoCoreError, OSError) as exc:
        raise TransientError(f"storage error: {exc}", code="storage_unavailable") from exc
    if size != document.size_bytes or digest.hexdigest() != document.sha256:
        raise PermanentError(
            "The stored file does not match the upload (it changed or was damaged); "
            "please upload it again.",
            code="file_mismatch",
        )
    with ctx.complete():
        pass
