"""API: direct uploads for large files (S3 only), thin callers of its services."""

import uuid

from django.urls import reverse
from ninja import Path, Router, Status

from api.documents import (
    ACCEPT_ERRORS,
    ALLOW_DUPLICATE,
    DUPLICATE_STATUS,
    accept_out,
    accept_status,
)
from api.errors import errors
from api.schemas import AcceptOut, UploadIn, UploadOut
from pipeline.models import RunSource
from pipeline.services.receive import direct_upload_open, direct_upload_receive

router = Router(tags=["uploads"])


@router.post(
    "/uploads",
    response={201: UploadOut, **errors(*ACCEPT_ERRORS)},
    url_name="upload_create",
    operation_id="uploads_create",
    summary="Ask for a URL to PUT a large document or scan to",
)
def upload_create(request, payload: UploadIn):
    """Declare a file (`filename`, exact `size_bytes`, optional `content_type`) and get a
    presigned URL to PUT it to, with the headers the PUT must send as given. Then POST
    `complete_url`. Refused at once, as `POST /documents` would refuse the file: `413`
    too large, `415` not PDF, DOCX, PNG, JPEG or TIFF, `402` no pages left, `429` +
    `Retry-After` when the pipeline is full. `409 presigned_unsupported` when this
    server does not store documents in S3: upload with `POST /documents` instead."""
    grant = direct_upload_open(
        channel="api",
        organisation=request.organisation,
        filename=payload.filename,
        size_bytes=payload.size_bytes,
        content_type=payload.content_type,
        api_token=request.api_token,
    )
    pending = grant.pending
    return Status(
        201,
        {
            "upload_id": pending.id,
            "url": grant.url,
            "method": "PUT",
            "headers": grant.headers,
            "expires_at": pending.expires_at,
            "complete_by": pending.complete_by,
            "complete_url": reverse("api:upload_complete", kwargs={"upload_id": pending.id}),
        },
    )


@router.post(
    "/uploads/{upload_id}/complete",
    response={
        202: AcceptOut,
        DUPLICATE_STATUS: AcceptOut,
        **errors(*ACCEPT_ERRORS, 404, 410),
    },
    url_name="upload_complete",
    operation_id="uploads_complete",
    summary="Process the file PUT for an upload",
)
def upload_complete(
    request,
    upload_id: uuid.UUID = Path(..., description="The upload's id, from POST /uploads."),
    allow_duplicate: bool = ALLOW_DUPLICATE,
):
    """Check the file PUT to the upload's URL and accept it exactly as `POST /documents`
    accepts one, with the same `202` body and the same errors for the same file; the
    refused file is deleted (PUT a corrected one to the same URL while it is valid).
    `409 upload_missing`: nothing was PUT yet. `422 size_mismatch`: the file is not the
    size declared. `410 upload_expired`: too late; ask for a new upload. Completing
    again answers the same `202`, and nothing new is made or charged. Bytes the
    organisation already has are answered `200` with their document (`duplicate_of`),
    as `POST /documents` answers them; the upload stays open, its file kept until
    `complete_by`: completing it with `?allow_duplicate=true` keeps a second copy."""
    acceptance = direct_upload_receive(
        channel="api",
        organisation=request.organisation,
        upload_id=upload_id,
        source=RunSource.API,
        api_token=request.api_token,
        allow_duplicate=allow_duplicate,
    )
    return Status(accept_status(acceptance), accept_out(acceptance))
