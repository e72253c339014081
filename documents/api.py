"""API: documents and quota. Thin callers of services and selectors."""

import uuid

from django.urls import reverse
from ninja import File, Header, Query, Router, Schema, Status
from ninja.files import UploadedFile

from documents.errors import InvalidUpload
from documents.schemas import (
    AcceptOut,
    DocumentOut,
    DocumentPage,
    ErrorOut,
    QuotaErrorOut,
    QuotaOut,
)
from documents.selectors import document_get, document_list
from documents.services.accept import document_accept
from documents.services.quota import quota_get
from documents.uploads import client_file_name, upload_size_error
from jobs.models import RunSource
from jobs.selectors import latest_runs_by_document

router = Router(tags=["documents"])

_ACCEPT_ERRORS = {
    400: ErrorOut,
    402: QuotaErrorOut,
    413: ErrorOut,
    415: ErrorOut,
    422: ErrorOut,
}


def accept_body(request, acceptance) -> dict:
    return {
        "run_id": acceptance.run.id,
        "document_id": acceptance.document.id,
        "status": acceptance.run.status,
        "status_url": reverse("api:run_get", kwargs={"run_id": acceptance.run.id}),
    }


@router.post(
    "/documents",
    response={202: AcceptOut, **_ACCEPT_ERRORS},
    url_name="document_upload",
    summary="Upload a PDF or DOCX for processing",
)
def document_upload(
    request,
    # Optional here so that a missing or oversized file gets our own clear answer.
    file: File[UploadedFile] = None,
    idempotency_key: str | None = Header(None, alias="Idempotency-Key"),
):
    """Accept a document (multipart field `file`) and return at once; poll
    `status_url` for progress.

    Repeating a request with the same `Idempotency-Key` returns the first
    answer and creates nothing new.
    """
    if too_large := upload_size_error(request):
        raise too_large
    if file is None:
        raise InvalidUpload(
            "Send the document in a multipart field named 'file'.", code="missing_file"
        )
    acceptance = document_accept(
        organisation=request.organisation,
        upload=file,
        filename=client_file_name(request, file),
        source=RunSource.API,
        api_token=request.api_token,
        idempotency_key=idempotency_key,
    )
    return Status(202, accept_body(request, acceptance))


class Paging(Schema):
    limit: int = 50
    offset: int = 0


def _document_out(document, run) -> dict:
    return {
        "id": document.id,
        "filename": document.filename,
        "kind": document.kind,
        "size_bytes": document.size_bytes,
        "version": document.version,
        "page_count": document.page_count,
        "chunk_count": document.chunk_count,
        "created_at": document.created_at,
        "updated_at": document.updated_at,
        "latest_run_id": run.id if run else None,
        "status": run.status if run else None,
    }


@router.get("/documents", response=DocumentPage, url_name="document_list")
def documents_list(request, paging: Query[Paging]):
    limit = min(max(paging.limit, 1), 200)
    offset = max(paging.offset, 0)
    queryset = document_list(organisation=request.organisation)
    documents = list(queryset[offset : offset + limit])
    runs = latest_runs_by_document(document_ids=[d.id for d in documents])
    return {
        "items": [_document_out(d, runs.get(d.id)) for d in documents],
        "count": queryset.count(),
        "limit": limit,
        "offset": offset,
    }


@router.get(
    "/documents/{document_id}", response={200: DocumentOut, 404: ErrorOut}, url_name="document_get"
)
def documents_get(request, document_id: uuid.UUID):
    document = document_get(organisation=request.organisation, document_id=document_id)
    runs = latest_runs_by_document(document_ids=[document.id])
    return _document_out(document, runs.get(document.id))


@router.get("/quota", response=QuotaOut, url_name="quota_get")
def quota(request):
    snapshot = quota_get(organisation_id=request.organisation.id)
    return {
        "page_limit": snapshot.page_limit,
        "pages_used": snapshot.pages_used,
        "pages_reserved": snapshot.pages_reserved,
        "pages_available": snapshot.pages_available,
    }
