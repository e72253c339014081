"""The upload form's script sends each file on its own and reads the answer as JSON: the
document and run it made, or why it was refused in plain words. Files above a size go
straight to S3 (a direct upload, as the API's) and are then completed here. Thin callers
of the receiving services (pipeline/services/receive.py).

A file whose bytes the organisation has already (a live document) is answered with that
document, not sent for processing again; the form field `allow_duplicate=true` keeps a
second copy."""

import json
import uuid

from django.http import HttpRequest, JsonResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.views.decorators.http import require_POST

from core.errors import InvalidUpload, ServiceError
from core.uploads import client_file_name, upload_refusal
from documents.roles import abilities
from pipeline.models import RunSource
from pipeline.services.accept import Acceptance
from pipeline.services.receive import direct_upload_open, direct_upload_receive, upload_receive
from web.json_access import json_member_required
from web.listing import document_row
from web.organisation_views import current_membership
from web.refusals import refusal_words

# The upload form's box that keeps a second copy of a file already uploaded (without
# JavaScript; the script offers it with the file's answer).
SECOND_COPY_LABEL = "Upload a second copy of files already uploaded"
# The JSON a direct upload is asked for with: a name, a size and a type.
DIRECT_REQUEST_MAX_BYTES = 4096


def _refused(exc: ServiceError, *, name: str | None, size: int | None = None) -> JsonResponse:
    body = {
        "detail": refusal_words(exc, name=name, size=size),
        "code": exc.code,
        "retry_after": getattr(exc, "retry_after", None),
    }
    response = JsonResponse(body, status=exc.status_code)
    for header, value in exc.headers().items():
        response[header] = value
    return response


def allow_duplicate(request: HttpRequest) -> bool:
    """Whether the form asks to keep a second copy of a file already uploaded."""
    return request.POST.get("allow_duplicate") == "true"


def already_uploaded_words(*, name: str | None, acceptance: Acceptance) -> SafeString:
    """What the form sent without JavaScript tells a member of a file whose bytes are
    those of a live document: a link to it, and how to keep a second copy anyway."""
    document = acceptance.document
    return format_html(
        '“{}” was already uploaded as <a href="{}">{}</a>; it was not sent again and '
        "no pages were charged. To keep a second copy anyway, tick “{}” and send it again.",
        name or document.filename,
        reverse("web:document_detail", kwargs={"document_id": document.id}),
        document.filename,
        SECOND_COPY_LABEL,
    )


def _duplicate(acceptance: Acceptance) -> JsonResponse:
    """200: the document that has these bytes (the script says so, with a link, and offers
    to send a second copy)."""
    document = acceptance.document
    return JsonResponse(
        {
            "duplicate_of": str(document.id),
            "document_id": str(document.id),
            "run_id": str(acceptance.run.id),
            "filename": document.filename,
            "url": reverse("web:document_detail", kwargs={"document_id": document.id}),
        },
        status=200,
    )


def _accepted(request: HttpRequest, acceptance: Acceptance) -> JsonResponse:
    if acceptance.duplicate:
        return _duplicate(acceptance)
    document, run = acceptance.document, acceptance.run
    can = abilities(current_membership(request).role)
    row = document_row(request, document, run, can)
    return JsonResponse(
        {
            "document_id": row["id"],
            "run_id": str(run.id),
            "filename": document.filename,
            "url": reverse("web:document_detail", kwargs={"document_id": document.id}),
            "digest": row["digest"],
            "row": row["row"],
            "item": row["item"],
        },
        status=202,
    )


@require_POST
@json_member_required
def upload_view(request: HttpRequest) -> JsonResponse:
    """One file (multipart field `file`), accepted or refused in JSON."""
    membership = current_membership(request)
    uploads = request.FILES.getlist("file")
    upload = uploads[0] if len(uploads) == 1 else None
    name = client_file_name(request, uploads[0]) if uploads else None
    refused = upload_refusal(request)
    if refused is None and len(uploads) > 1:  # the page's script sends one file a request
        refused = InvalidUpload("Send one file.", code="one_file_per_request")
    try:
        acceptance = upload_receive(
            channel="web",
            organisation=membership.organisation,
            upload=upload,
            filename=name,
            refused=refused,
            source=RunSource.WEB,
            user=request.user,
            allow_duplicate=allow_duplicate(request),
        )
    except ServiceError as exc:
        return _refused(exc, name=name, size=upload.size if upload is not None else None)
    return _accepted(request, acceptance)


@require_POST
@json_member_required
def direct_upload_view(request: HttpRequest) -> JsonResponse:
    """Open a direct upload for a file the page will PUT to S3 (JSON `filename`,
    `size_bytes`, `content_type`): the URL and headers to PUT with, and where to complete."""
    membership = current_membership(request)
    try:
        declared = _declared(request)
    except ServiceError as exc:
        # A request our own script did not make (the API's schema refuses its like): no
        # upload to count.
        return _refused(exc, name=None)
    name = declared["filename"] or None
    try:
        grant = direct_upload_open(
            channel="web",
            organisation=membership.organisation,
            filename=declared["filename"],
            size_bytes=declared["size_bytes"],
            content_type=declared["content_type"],
            user=request.user,
        )
    except ServiceError as exc:
        return _refused(exc, name=name, size=declared["size_bytes"])
    return JsonResponse(
        {
            "upload_id": str(grant.pending.id),
            "url": grant.url,
            "headers": grant.headers,
            "complete_url": reverse(
                "web:direct_upload_complete", kwargs={"upload_id": grant.pending.id}
            ),
        },
        status=201,
    )


def _declared(request: HttpRequest) -> dict:
    """The file a direct upload is asked for, as the page declares it."""
    if request.content_type != "application/json":
        raise InvalidUpload("Send the file's name and size as JSON.")
    if len(request.body) > DIRECT_REQUEST_MAX_BYTES:
        raise InvalidUpload("The request is too long.")
    try:
        body = json.loads(request.body or b"{}")
    except ValueError:
        raise InvalidUpload("The request is not JSON.") from None
    if not isinstance(body, dict):
        raise InvalidUpload("The request is not a JSON object.")
    filename, size, content_type = (
        body.get("filename"),
        body.get("size_bytes"),
        body.get("content_type") or None,
    )
    if not isinstance(filename, str) or not isinstance(size, int) or isinstance(size, bool):
        raise InvalidUpload("Give the file's name and its size in bytes.")
    if content_type is not None and not isinstance(content_type, str):
        raise InvalidUpload("The file's type must be text.")
    return {"filename": filename, "size_bytes": size, "content_type": content_type}


@require_POST
@json_member_required
def direct_upload_complete_view(request: HttpRequest, upload_id: uuid.UUID) -> JsonResponse:
    """Accept the file PUT for one of the organisation's direct uploads (another's: 404)."""
    membership = current_membership(request)
    try:
        acceptance = direct_upload_receive(
            channel="web",
            organisation=membership.organisation,
            upload_id=upload_id,
            user=request.user,
            source=RunSource.WEB,
            allow_duplicate=allow_duplicate(request),
        )
    except ServiceError as exc:
        return _refused(exc, name=None)
    return _accepted(request, acceptance)
