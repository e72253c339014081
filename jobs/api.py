"""API: runs."""

import uuid

from ninja import Router

from documents.schemas import ErrorOut
from jobs.models import ImportRun
from jobs.schemas import RunOut
from jobs.selectors import run_get

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
