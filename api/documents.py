"""API: documents with their runs, and runs. Thin callers of services and selectors."""

import logging
import uuid

from django.urls import reverse
from ninja import File, Header, Path, Query, Router, Status
from ninja.files import UploadedFile

from api.errors import ERROR_CODES, ErrorCode, errors
from api.params import DOCUMENT_ID, PAGE_LIMIT, PAGE_OFFSET, RUN_ID
from api.responses import BINARY_FILE, no_content
from api.schemas import AcceptOut, DocumentOut, DocumentPage, PassageOrder, RunOut, SearchOut
from core.errors import InvalidUpload
from core.http import download_response, kept_response
from core.uploads import client_file_name, upload_refusal
from documents.pictures import (
    PICTURE_MAX_AGE_SECONDS,
    PICTURE_MEDIA_TYPE,
    page_picture_get,
    page_picture_tag,
)
from documents.selectors import document_file, document_get, document_list
from formats.base import MEDIA_TYPES
from pipeline.models import ImportRun, RunSource, RunStatus, Stage
from pipeline.selectors import documents_with_latest_runs, run_get
from pipeline.services.accept import IDEMPOTENCY_KEY_MAX, Acceptance
from pipeline.services.deletion import document_delete
from pipeline.services.people import run_cancel, run_retry
from pipeline.services.receive import upload_receive
from pipeline.services.transitions import Actor
from retrieval.passages import document_passages
from retrieval.search import MAX_LIMIT as SEARCH_MAX_LIMIT
from retrieval.search import MAX_OFFSET as SEARCH_MAX_OFFSET
from retrieval.search import MAX_QUERY_CHARS, documents_search

logger = logging.getLogger(__name__)
router = Router()

# What accepting a file may answer, however its bytes came.
ACCEPT_ERRORS = (402, 403, 409, 413, 415, 422, 503)


# Bytes the organisation has already: answered with their document, nothing charged.
DUPLICATE_STATUS = 200
ALLOW_DUPLICATE = Query(
    False,
    description=(
        "`true` keeps and processes the file (and charges its pages) even when the "
        "organisation already has a live document with the same bytes; by default that "
        "upload is answered `200` with the existing document (`duplicate_of`)."
    ),
)


def accept_out(acceptance: Acceptance) -> dict:
    """The body of an accepted upload, however its bytes came: 202, or 200 for bytes the
    organisation has already (`duplicate_of`)."""
    return {
        "run_id": acceptance.run.id,
        "document_id": acceptance.document.id,
        "status": acceptance.run.status,
        "status_url": reverse("api:run_get", kwargs={"run_id": acceptance.run.id}),
        "filename": acceptance.document.filename,
        "duplicate_of": acceptance.document.id if acceptance.duplicate else None,
    }


def accept_status(acceptance: Acceptance) -> int:
    return DUPLICATE_STATUS if acceptance.duplicate else 202


@router.post(
    "/documents",
    response={202: AcceptOut, DUPLICATE_STATUS: AcceptOut, **errors(*ACCEPT_ERRORS)},
    url_name="document_upload",
    operation_id="documents_upload",
    summary="Upload a PDF, DOCX or scan (PNG, JPEG, TIFF) for processing",
    tags=["documents"],
    # `file` is required; the signature leaves it optional only so that a missing or
    # oversized file gets our own answer (400 missing_file, 413) rather than pydantic's.
    # The form holds `file` and nothing else (another field is a 400 unknown_field), and
    # `file` is one of the media types below, as its bytes show it (its part's own
    # Content-Type is not read).
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "multipart/form-data": {
                    "schema": {"required": ["file"], "additionalProperties": False},
                    "encoding": {"file": {"contentType": ", ".join(MEDIA_TYPES.values())}},
                }
            },
        }
    },
)
def document_upload(
    request,
    file: File[UploadedFile] = None,
    idempotency_key: str = Header(
        None,
        alias="Idempotency-Key",
        min_length=1,
        max_length=IDEMPOTENCY_KEY_MAX,
        pattern=r"\S",
        description=(
            "Any string of yours, 1 to 255 characters: sending the same key again answers "
            "the first request's 202 and makes nothing new (a different file under the "
            "same key is a 400 idempotency_key_reused)."
        ),
    ),
    allow_duplicate: bool = ALLOW_DUPLICATE,
):
    """Accept a document (multipart field `file`) and return at once (`202`); poll
    `status_url` for progress.

    Bytes the organisation already has in a live document are not processed or charged
    again: the answer is `200` with that document (`document_id` and `duplicate_of`,
    `run_id` its latest run). `?allow_duplicate=true` keeps a second copy (`202`).
    Repeating a request with the same `Idempotency-Key` returns the first
    answer and creates nothing new. When the pipeline is full the answer is
    `429` with `Retry-After` (seconds): send the same request again after it.
    `409 document_deleted`: the key's document has been deleted since.
    """
    acceptance = upload_receive(
        channel="api",
        organisation=request.organisation,
        upload=file,
        filename=client_file_name(request, file) if file is not None else None,
        refused=upload_refusal(request) or _other_fields_refusal(request, file),
        source=RunSource.API,
        api_token=request.api_token,
        idempotency_key=idempotency_key,
        allow_duplicate=allow_duplicate,
    )
    return Status(accept_status(acceptance), accept_out(acceptance))


def _other_fields_refusal(request, file) -> InvalidUpload | None:
    """400 unknown_field for a form field beside `file` (the operation declares none):
    an option sent in the form, where the API reads it from the query, is not ignored.
    Without `file` at all, saying so (missing_file) helps more."""
    others = sorted(set(request.POST) | (set(request.FILES) - {"file"}))
    if file is None or not others:
        return None
    return InvalidUpload(
        f"The form holds one field, 'file'; {others[0]!r} is not one of the upload's "
        "(options such as allow_duplicate go in the query string).",
        code="unknown_field",
    )


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
        "textless_pages": document.textless_pages,
        "ocr_pages": document.ocr_pages,
        "text_engine": document.text_engine or None,
        "created_at": document.created_at,
        "updated_at": document.updated_at,
        "latest_run_id": run.id if run else None,
        "status": run.status if run else None,
        "connector": _connector_out(run),
        "deleted_at_source": document.source_deleted_at,
    }


@router.get(
    "/documents",
    response={200: DocumentPage, **errors(422)},
    url_name="document_list",
    operation_id="documents_list",
    summary="List the organisation's documents",
    tags=["documents"],
)
def documents_list(
    request,
    limit: int = PAGE_LIMIT,
    offset: int = PAGE_OFFSET,
):
    """The organisation's documents, newest first, each with its newest run's status."""
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
    response={200: DocumentOut, **errors(404, 422)},
    url_name="document_get",
    operation_id="documents_get",
    summary="Get a document",
    tags=["documents"],
)
def documents_get(request, document_id: uuid.UUID = DOCUMENT_ID):
    document = document_get(organisation=request.organisation, document_id=document_id)
    [(document, run)] = documents_with_latest_runs(documents=[document])
    return _document_out(document, run)


@router.delete(
    "/documents/{document_id}",
    response={204: None, **errors(403, 404, 422)},
    url_name="document_delete",
    operation_id="documents_delete",
    summary="Delete a document",
    tags=["documents"],
)
def documents_delete(request, document_id: uuid.UUID = DOCUMENT_ID):
    """Delete a document: its processing stops, its text, chunks and file are removed,
    and pages held for it are given back (pages already charged stay charged). It is
    then gone from every answer; deleting it again is a `404`. Takes an admin's token
    (`403` otherwise)."""
    document = document_get(organisation=request.organisation, document_id=document_id)
    document_delete(document=document, actor=Actor.of(api_token=request.api_token))
    return no_content()


@router.get(
    "/documents/{document_id}/file",
    response=errors(404, 409, 422, 503),
    url_name="document_file",
    operation_id="documents_file",
    summary="Download a document's file",
    tags=["documents"],
    openapi_extra={
        "responses": {
            200: {
                "description": "The file, as an attachment under its name.",
                # The response's Content-Type is the document's own type; generated
                # clients read the file as `application/octet-stream`, bytes.
                "content": {
                    media_type: {"schema": BINARY_FILE}
                    for media_type in ("application/octet-stream", *MEDIA_TYPES.values())
                },
                "headers": {
                    "Content-Disposition": {
                        "description": "`attachment` with the document's name.",
                        "schema": {"type": "string"},
                    },
                    "Content-Length": {"schema": {"type": "integer", "minimum": 0}},
                },
            },
            302: {
                "description": "The file is in S3: `Location` serves it for a minute.",
                "headers": {
                    "Location": {
                        "required": True,
                        "schema": {"type": "string", "format": "uri"},
                    }
                },
            },
        }
    },
)
def documents_file(request, document_id: uuid.UUID = DOCUMENT_ID):
    """The document's original file (of a connected file, its current version), as an
    attachment under its name; on S3 a `302` to a short-lived URL that serves it. `409`
    while a connected file is not stored yet, `503` with `Retry-After` when the storage
    does not answer."""
    document = document_get(organisation=request.organisation, document_id=document_id)
    return download_response(
        stored=document_file(document=document),
        filename=document.filename,
        content_type=MEDIA_TYPES[document.kind],
    )


@router.get(
    "/documents/{document_id}/pages/{number}/picture",
    response=errors(404, 422, 503),
    url_name="document_page_picture",
    operation_id="documents_page_picture",
    summary="A picture of a document's page",
    tags=["documents"],
    openapi_extra={
        "responses": {
            200: {
                "description": "The page as a WebP picture.",
                # Sent as image/webp; generated clients read it as bytes.
                "content": {
                    media_type: {"schema": BINARY_FILE}
                    for media_type in ("application/octet-stream", PICTURE_MEDIA_TYPE)
                },
                "headers": {
                    "ETag": {
                        "description": "Changes with the document's version.",
                        "schema": {"type": "string"},
                    },
                    "Cache-Control": {"schema": {"type": "string"}},
                },
            },
            304: {"description": "The picture whose ETag was sent in If-None-Match."},
        }
    },
)
def documents_page_picture(
    request,
    document_id: uuid.UUID = DOCUMENT_ID,
    number: int = Path(..., ge=1, le=2**31 - 1, description="The page, from 1."),
    size: str = Query(
        "page",
        max_length=5,
        pattern="^(page|thumb)$",
        description="`page`: 96 dpi; `thumb`: 200 pixels wide.",
    ),
):
    """Page `number` of a PDF drawn as a picture (drawn the first time it is asked for,
    then kept), with an ETag (`304` to `If-None-Match`). `404` for a page the document
    does not have, a document without fixed pages (DOCX) or not yet read, and a page that
    cannot be drawn; `503` with `Retry-After` when the storage does not answer."""
    document = document_get(organisation=request.organisation, document_id=document_id)
    return kept_response(
        request,
        tag=page_picture_tag(document=document, number=number, size=size),
        body=lambda: page_picture_get(document=document, number=number, size=size),
        content_type=PICTURE_MEDIA_TYPE,
        max_age=PICTURE_MAX_AGE_SECONDS,
    )


# What each stage that counts its work counts.
PROGRESS_UNITS = {Stage.EXTRACT: "pages", Stage.EMBED: "chunks"}


def _progress_out(run: ImportRun) -> dict | None:
    """How far the run's stage got, while it counts (and where it stopped, for a run
    that failed or was cancelled in it); None for a stage that counts nothing."""
    unit = PROGRESS_UNITS.get(run.stage)
    if unit is None or run.progress_total == 0:
        return None
    return {"done": run.progress_done, "total": run.progress_total, "unit": unit}


def _run_error_out(run: ImportRun) -> dict | None:
    if not run.error_message:
        return None
    code = run.error_code
    if code not in ERROR_CODES:
        # A code no ErrorCode names (tests/api/test_openapi_contract.py finds those the
        # code base writes) would fail the answer's schema: say what is known.
        logger.warning("run %s: error code %r is not in ErrorCode", run.id, code)
        code = ErrorCode.UNEXPECTED_ERROR
    return {"code": code, "message": run.error_message}


def _run_out(run: ImportRun) -> dict:
    document = run.document
    return {
        "id": run.id,
        "status": run.status,
        "stage": run.stage,
        "progress": _progress_out(run),
        "attempts": run.total_attempts,
        "stage_attempts": None if run.status == RunStatus.SUCCEEDED else run.stage_attempts,
        "error": _run_error_out(run),
        "document_id": run.document_id,
        "page_count": document.page_count if document else None,
        "chunk_count": document.chunk_count if document else 0,
        "unreadable_pages": document.unreadable_pages if document else [],
        "textless_pages": document.textless_pages if document else [],
        "text_engine": (document.text_engine or None) if document else None,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
        "source": run.source,
        "connector": _connector_out(run),
    }


@router.get(
    "/runs/{run_id}",
    response={200: RunOut, **errors(404, 422)},
    url_name="run_get",
    operation_id="runs_get",
    summary="Get a run: its status, stage, progress and error",
    tags=["runs"],
)
def runs_get(request, run_id: uuid.UUID = RUN_ID):
    return _run_out(run_get(organisation=request.organisation, run_id=run_id))


@router.post(
    "/runs/{run_id}/retry",
    response={200: RunOut, **errors(402, 403, 404, 409, 422)},
    url_name="run_retry",
    operation_id="runs_retry",
    summary="Start a failed, dead-lettered or cancelled run again",
    tags=["runs"],
)
def runs_retry(request, run_id: uuid.UUID = RUN_ID):
    """Start a failed, dead-lettered or cancelled run again from the stage it stopped in
    (`429` with `Retry-After` when the pipeline is busy, as for an upload)."""
    run = run_get(organisation=request.organisation, run_id=run_id)
    run_retry(run=run, actor=Actor.of(api_token=request.api_token), admit=True)
    return _run_out(run_get(organisation=request.organisation, run_id=run_id))


@router.post(
    "/runs/{run_id}/cancel",
    response={200: RunOut, **errors(403, 404, 409, 422)},
    url_name="run_cancel",
    operation_id="runs_cancel",
    summary="Cancel a queued or processing run",
    tags=["runs"],
)
def runs_cancel(request, run_id: uuid.UUID = RUN_ID):
    """Stop a queued or processing run and give its reserved pages back."""
    run = run_get(organisation=request.organisation, run_id=run_id)
    run_cancel(run=run, actor=Actor.of(api_token=request.api_token))
    return _run_out(run_get(organisation=request.organisation, run_id=run_id))


@router.get(
    "/search",
    response={200: SearchOut, **errors(404, 422, 503)},
    url_name="search",
    operation_id="search",
    summary="Search your organisation's documents",
    tags=["search"],
)
def search(
    request,
    q: str = Query(
        ...,
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        # Linear: pydantic's patterns never backtrack.
        pattern=r"\w",
        description="The words to find (at least one word that is not a -word).",
    ),
    limit: int = Query(10, ge=1, le=SEARCH_MAX_LIMIT, description="At most this many, 1 to 50."),
    offset: int = Query(
        0, ge=0, le=SEARCH_MAX_OFFSET, description="Skip this many documents (paging), to 200."
    ),
    document: uuid.UUID | None = Query(
        None, description="Search this document alone: every passage that holds the words."
    ),
    order: PassageOrder = Query(
        PassageOrder.RANK,
        description="With `document`: its passages best first (`rank`) or in page order "
        "(`page`).",
    ),
):
    """The documents that best match `q`, best first, one result per document with its
    best chunk (and how many of its passages hold every word: `passages`): those holding
    every word first, then those holding the most of them. With `document`, that
    document's passages, every one that holds the words (or, where none holds them all,
    those holding some), paged with `offset` and `more`; `total` counts them. Words match
    their other forms ("alphabets" finds "alphabet"); rarer words count more; "a quoted
    phrase", `or` and `-word` work as in a web search; a `q` of only -words finds
    nothing (no results). `404` for a `document` that is not the organisation's.
    `503 search_timeout` with `Retry-After`: the search took too long."""
    total = None
    if document is not None:
        document_get(organisation=request.organisation, document_id=document)
        results = document_passages(
            organisation=request.organisation,
            document_id=document,
            query=q,
            order=order.value,
            limit=limit,
            offset=offset,
        )
        total = results.total
    else:
        results = documents_search(
            organisation=request.organisation, query=q, limit=limit, offset=offset
        )
    return {
        "total": total,
        "ranking": results.ranking,
        "more": results.more,
        "neighbours": results.neighbours,
        "model_share": results.model_share,
        "embedding_unavailable": results.embedding_unavailable,
        "suggestion": results.suggestion,
        "results": [
            {
                "document_id": hit.document_id,
                "filename": hit.filename,
                "pages": hit.pages,
                "chunk_index": hit.chunk_index,
                "snippet": hit.snippet,
                "score": hit.score,
                "page_start": hit.page_start,
                "page_end": hit.page_end,
                "section": hit.section,
                "marks": list(hit.marks),
                "passages": hit.passages,
                "page": hit.page,
            }
            for hit in results.hits
        ],
    }
