"""Every door an upload comes in by (the API, the member page's script and its form, and
the direct uploads of both) receives it here: what reading the request refused is
refused, a missing file is refused, the file is accepted (pipeline/services/accept.py,
pipeline/services/direct_uploads.py), and every answer is counted for the operators
(core/upload_counts.py) under the door's channel, `api` or `web`. The doors only turn
the answer or the refusal into their own response.

Bytes the organisation already has in a live document are answered with that document
(`Acceptance.duplicate`), not kept or charged again, unless the uploader asks for a
second copy (`allow_duplicate`); each door says so in its own words.
"""

import uuid
from collections.abc import Callable
from typing import TypeVar

from django.contrib.auth.models import AbstractBaseUser
from django.core.files.uploadedfile import UploadedFile

from core.errors import InvalidUpload, ServiceError
from core.upload_counts import ACCEPTED, DUPLICATE, REFUSED, REPLAYED, upload_count
from documents.models import ApiToken, Organisation
from pipeline.services.accept import Acceptance, document_accept
from pipeline.services.direct_uploads import (
    UploadGrant,
    pending_upload_complete,
    pending_upload_create,
)

Answer = TypeVar("Answer", Acceptance, UploadGrant)


def _counted(channel: str, receive: Callable[[], Answer]) -> Answer:
    try:
        answer = receive()
    except ServiceError as exc:
        upload_count(channel=channel, result=REFUSED, code=exc.code)
        raise
    if isinstance(answer, Acceptance):
        result = REPLAYED if answer.replayed else DUPLICATE if answer.duplicate else ACCEPTED
        upload_count(channel=channel, result=result)
    return answer


def upload_receive(
    *,
    channel: str,
    organisation: Organisation,
    upload: UploadedFile | None,
    source: str,
    filename: str | None = None,
    refused: ServiceError | None = None,
    user: AbstractBaseUser | None = None,
    api_token: ApiToken | None = None,
    idempotency_key: str | None = None,
    allow_duplicate: bool = False,
) -> Acceptance:
    """Receive one uploaded file: `refused` is why reading the request kept no file (too
    large, too many), raised as it is; no `upload` is 400 `missing_file`; otherwise the
    file is accepted as `document_accept` says (a live document's bytes answered with it
    unless `allow_duplicate`). Counted under `channel` either way."""

    def receive() -> Acceptance:
        if refused is not None:
            raise refused
        if upload is None:
            raise InvalidUpload(
                "Send the document in a multipart field named 'file'.", code="missing_file"
            )
        return document_accept(
            organisation=organisation,
            upload=upload,
            filename=filename,
            source=source,
            user=user,
            api_token=api_token,
            idempotency_key=idempotency_key,
            allow_duplicate=allow_duplicate,
        )

    return _counted(channel, receive)


def direct_upload_open(
    *,
    channel: str,
    organisation: Organisation,
    filename: str,
    size_bytes: int,
    content_type: str | None = None,
    user: AbstractBaseUser | None = None,
    api_token: ApiToken | None = None,
) -> UploadGrant:
    """Open a direct upload (`pending_upload_create`); a refusal is counted under
    `channel` (its acceptance is counted when it is completed)."""
    return _counted(
        channel,
        lambda: pending_upload_create(
            organisation=organisation,
            filename=filename,
            size_bytes=size_bytes,
            content_type=content_type,
            user=user,
            api_token=api_token,
        ),
    )


def direct_upload_receive(
    *,
    channel: str,
    organisation: Organisation,
    upload_id: uuid.UUID,
    source: str,
    user: AbstractBaseUser | None = None,
    api_token: ApiToken | None = None,
    allow_duplicate: bool = False,
) -> Acceptance:
    """Receive the file PUT for a direct upload (`pending_upload_complete`), counted under
    `channel`."""
    return _counted(
        channel,
        lambda: pending_upload_complete(
            organisation=organisation,
            upload_id=upload_id,
            source=source,
            user=user,
            api_token=api_token,
            allow_duplicate=allow_duplicate,
        ),
    )
