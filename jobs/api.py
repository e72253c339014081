"""API: runs."""

import uuid

from ninja import Router

from documents.schemas import ErrorOut, QuotaErrorOut
from jobs.models import ImportRun
from jobs.schemas import RunOut
from jobs.selectors import run_get
from jobs.services import run_cancel, run_retry

router = Router(tags=["runs"])


def run_out(run: ImportRun) -> dict:
    return {
        "id": run.id,
        "status": run.status,
        "stage": run.stage,
        "progress": {"done": run.progress_done, "total": run.progress_total},
        "attempts": run.attempts,
        "error": (
            {"code": run.error_code or "error", "message": run.error_message}
            if run.error_message
            else None
        ),
        "document_id": run.document_id,
        "page_count": run.document.page_count if run.document else None,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
    }


@router.get("/runs/{run_id}", response={200: RunOut, 404: ErrorOut}, url_name="run_get")
def runs_get(request, run_id: uuid.UUID):
    return run_out(run_get(organisation=request.organisation, run_id=run_id))


def _actor_label(request) -> str:
    return f"api-token:{request.api_token.prefix}"


@router.post(
    "/runs/{run_id}/retry",
    response={200: RunOut, 402: QuotaErrorOut, 404: ErrorOut, 409: ErrorOut},
    url_name="run_retry",
)
def runs_retry(request, run_id: uuid.UUID):
    """Start a failed, dead-lettered or cancelled run again from the stage it stopped in."""
    run = run_get(organisation=request.organisation, run_id=run_id)
    run_retry(run=run, actor=None, actor_label=_actor_label(request))
    return run_out(run_get(organisation=request.organisation, run_id=run_id))


@router.post(
    "/runs/{run_id}/cancel",
    response={200: RunOut, 404: ErrorOut, 409: ErrorOut},
    url_name="run_cancel",
)
def runs_cancel(request, run_id: uuid.UUID):
    """Stop a queued or processing run and give its reserved pages back."""
    run = run_get(organisation=request.organisation, run_id=run_id)
    run_cancel(run=run, actor=None, actor_label=_actor_label(request))
    return run_out(run_get(organisation=request.organisation, run_id=run_id))
