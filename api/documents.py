"""API: documents with their runs, and runs. Thin callers of services and selectors."""

import uuid

from django.http import FileResponse, HttpResponseRedirect
from django.urls import reverse
from ninja import File, Header, Query, Router, Schema, Status
from ninja.files import UploadedFile

from api.errors import BusyErrorOut, ErrorOut, ForbiddenOut, QuotaErrorOut
from api.schemas import AcceptOut, DocumentOut, DocumentPage, RunOut, SearchOut
from core.disposition import attachment
from core.errors import InvalidUpload, ServiceError
from core.upload_counts import ACCEPTED, REFUSED, REPLAYED, upload_count
from core.uploads import client_file_name, upload_refusal
from documents.formats.base import MEDIA_TYPES
from documents.selectors import document_file, document_get, document_list
from pipeline.models import ImportRun, RunSource
from pipeline.selectors import documents_with_latest_runs, run_get
from pipeline.services.accept import Acceptance, document_accept
from pipeline.services.deletion import document_delete
from pipeline.services.people import run_cancel, run_retry
from pipeline.services.transitions import Actor
from retrieval.search import documents_search

router = Router()

ACCEPT_ERRORS = {
    400: ErrorOut,
    402: QuotaErrorOut,
    403: ForbiddenOut,
    413: ErrorOut,
    415: ErrorOut,
    422: ErrorOut,
    429: BusyErrorOut,
    503: BusyErrorOut,
}
# Far past any real list, within PostgreSQL's bigint.
MAX_OFFSET = 10**12


def accept_out(acceptance: Acceptance) -> dict:
    """The 202 body of an accepted upload, however its bytes came."""
    return {
        "run_id": acceptance.run.id,
        "document_id": acceptance.document.id,
        "status": acceptance.run.status,
        "status_url": reverse("api:run_get", kwargs={"run_id": acceptance.run.id}),
    }


@router.post(
    "/documents",
    response={202: AcceptOut, **ACCEPT_ERRORS},
    url_name="document_upload",
    summary="Upload a PDF or DOCX for processing",
    tags=["documents"],
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
    answer and creates nothing new. When the pipeline is full the answer is
    `429` with `Retry-After` (seconds): send the same request again after it.
    """
    try:
        if refused := upload_refusal(request):
            raise refused
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
    except ServiceError as exc:
        upload_count(channel="api", result=REFUSED, code=exc.code)
        raise
    upload_count(channel="api", result=REPLAYED if acceptance.replayed else ACCEPTED)
    return Status(202, accept_out(acceptance))


class Paging(Schema):
    limit: int = 50
    offset: int = 0


def _connector_out(run: ImportRun | None) -> dict | None:
    # A connector's run has its file's import (the reverse of ConnectorImport.run).
    record = getattr(run, "connector_import", None) if run is not None else None
    if record is None:
        return None
    return {
        "connection_id": record.connection_id,
        "provider": record.connection.provider,
        "path": record.path,
        "folder": record.connection.folder_path,
        "content_version": record.content_version,
    }


def _document_out(document, run) -> dict:
    return {
        "id": document.id,
        "filename": document.filename,
        "kind": document.kind,
        "size_bytes": document.size_bytes,
        "version": document.version,
        "page_count": document.page_count,
        "chunk_count": document.chunk_count,
        "unreadable_pages": document.unreadable_pages,
        "created_at": document.created_at,
        "updated_at": document.updated_at,
        "latest_run_id": run.id if run else None,
        "status": run.status if run else None,
        "connector": _connector_out(run),
        "deleted_at_source": document.source_deleted_at,
    }


@router.get("/documents", response=DocumentPage, url_name="document_list", tags=["documents"])
def documents_list(request, paging: Query[Paging]):
    limit = min(max(paging.limit, 1), 200)
    offset = min(max(paging.offset, 0), MAX_OFFSET)
    queryset = document_list(organisation=request.organisation)
    rows = documents_with_latest_runs(documents=list(queryset[offset : offset + limit]))
    return {
        "items": [_document_out(document, run) for document, run in rows],
        "count": queryset.count(),
        "limit": limit,
        "offset": offset,
    }


@router.get(
    "/documents/{document_id}",
    response={200: DocumentOut, 404: ErrorOut},
    url_name="document_get",
    tags=["documents"],
)
def documents_get(request, document_id: uuid.UUID):
    document = document_get(organisation=request.organisation, document_id=document_id)
    [(document, run)] = documents_with_latest_runs(documents=[document])
    return _document_out(document, run)


@router.delete(
    "/documents/{document_id}",
    response={204: None, 403: ForbiddenOut, 404: ErrorOut},
    url_name="document_delete",
    tags=["documents"],
)
def documents_delete(request, document_id: uuid.UUID):
    """Delete a document: its processing stops, its text, chunks and file are removed,
    and pages held for it are given back (pages already charged stay charged). It is
    then gone from every answer; deleting it again is a `404`. Takes an admin's token
    (`403` otherwise)."""
    document = document_get(organisation=request.organisation, document_id=document_id)
    document_delete(document=document, actor=Actor.of(api_token=request.api_token))
    return Status(204, None)


FILE_BLOCK_BYTES = 64 * 1024
_FILE_CONTENT = {
    media_type: {"schema": {"type": "string", "format": "binary"}}
    for media_type in MEDIA_TYPES.values()
}


@router.get(
    "/documents/{document_id}/file",
    response={404: ErrorOut, 409: ErrorOut, 503: BusyErrorOut},
    url_name="document_file",
    tags=["documents"],
    openapi_extra={
        "responses": {
            200: {"description": "The file", "content": _FILE_CONTENT},
            302: {"description": "On S3: a URL that serves the file for a minute"},
        }
    },
)
def documents_file(request, document_id: uuid.UUID):
    """The document's original file (of a connected file, its current version), as an
    attachment under its name; on S3 a `302` to a short-lived URL that serves it. `409`
    while a connected file is not stored yet, `503` with `Retry-After` when the storage
    does not answer."""
    document = document_get(organisation=request.organisation, document_id=document_id)
    stored = document_file(document=document)
    if isinstance(stored, str):
        response = HttpResponseRedirect(stored)
        response["Cache-Control"] = "private, no-store"
        return response
    # Streamed a block at a time, and the file closed at the end (FileResponse does both).
    response = FileResponse(stored.file, content_type=MEDIA_TYPES[document.kind])
    # Blocks of 64 KiB rather than 4 KiB: a read from S3 is a call through botocore.
    response.block_size = FILE_BLOCK_BYTES
    response["Content-Length"] = str(stored.size)
    response["Content-Disposition"] = attachment(document.filename)
    response["Cache-Control"] = "private, no-store"
    return response


def _run_out(run: ImportRun) -> dict:
    return {
        "id": run.id,
        "status": run.status,
        "stage": run.stage,
        "progress": {"done": run.progress_done, "total": run.progress_total},
        "attempts": run.total_attempts,
        "stage_attempts": run.stage_attempts,
        "error": (
            {"code": run.error_code or "error", "message": run.error_message}
            if run.error_message
            else None
        ),
        "document_id": run.document_id,
        "page_count": run.document.page_count if run.document else None,
        "unreadable_pages": run.document.unreadable_pages if run.document else [],
        "created_at": run.created_at,
        "updated_at": run.updated_at,
        "source": run.source,
        "connector": _connector_out(run),
    }


@router.get(
    "/runs/{run_id}", response={200: RunOut, 404: ErrorOut}, url_name="run_get", tags=["runs"]
)
def runs_get(request, run_id: uuid.UUID):
    return _run_out(run_get(organisation=request.organisation, run_id=run_id))


@router.post(
    "/runs/{run_id}/retry",
    response={
        200: RunOut,
        402: QuotaErrorOut,
        403: ForbiddenOut,
        404: ErrorOut,
        409: ErrorOut,
        429: BusyErrorOut,
    },
    url_name="run_retry",
    tags=["runs"],
)
def runs_retry(request, run_id: uuid.UUID):
    """Start a failed, dead-lettered or cancelled run again from the stage it stopped in
    (`429` with `Retry-After` when the pipeline is busy, as for an upload)."""
    run = run_get(organisation=request.organisation, run_id=run_id)
    run_retry(run=run, actor=Actor.of(api_token=request.api_token), admit=True)
    return _run_out(run_get(organisation=request.organisation, run_id=run_id))


@router.post(
    "/runs/{run_id}/cancel",
    response={200: RunOut, 403: ForbiddenOut, 404: ErrorOut, 409: ErrorOut},
    url_name="run_cancel",
    tags=["runs"],
)
def runs_cancel(request, run_id: uuid.UUID):
    """Stop a queued or processing run and give its reserved pages back."""
    run = run_get(organisation=request.organisation, run_id=run_id)
    run_cancel(run=run, actor=Actor.of(api_token=request.api_token))
    return _run_out(run_get(organisation=request.organisation, run_id=run_id))


@router.get(
    "/search",
    response={200: SearchOut, 400: ErrorOut, 503: ErrorOut},
    url_name="search",
    summary="Search your organisation's documents",
    tags=["search"],
)
def search(request, q: str, limit: int = 10):
    """The documents that best match `q` (every word; "a quoted phrase", `or` and `-word`
    work as in a web search), best first, one result per document with its best chunk.
    `limit` is 1 to 50."""
    results = documents_search(organisation=request.organisation, query=q, limit=limit)
    return {
        "ranking": results.ranking,
        "results": [
            {
                "document_id": hit.document_id,
                "filename": hit.filename,
                "pages": hit.pages,
                "chunk_index": hit.chunk_index,
                "snippet": hit.snippet,
                "score": hit.score,
            }
            for hit in results.hits
        ],
    }
