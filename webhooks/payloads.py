"""What each event tells: the ids and URLs an integration needs next, never a document's
text. URLs are the API's paths, as the API's own `status_url` is: an integration calls
them on the server it already calls."""

from django.urls import reverse

from documents.models import Document
from pipeline.models import ImportRun, RunStatus
from webhooks.dispatch import event_publish
from webhooks.models import EventType

RUN_EVENTS = {
    RunStatus.SUCCEEDED: EventType.RUN_SUCCEEDED,
    RunStatus.FAILED: EventType.RUN_FAILED,
    RunStatus.DEAD_LETTER: EventType.RUN_DEAD_LETTER,
    RunStatus.CANCELLED: EventType.RUN_CANCELLED,
}


def api_url(name: str, **kwargs) -> str:
    return reverse(f"api:{name}", kwargs=kwargs)


def run_ended_publish(run: ImportRun) -> None:
    """The pipeline's listener of ended runs (pipeline/events.py)."""
    data = {
        "run_id": str(run.id),
        "status": run.status,
        "stage": run.stage,
        "source": run.source,
        "document_id": str(run.document_id) if run.document_id else None,
        "status_url": api_url("run_get", run_id=run.id),
        "document_url": api_url("document_get", document_id=run.document_id)
        if run.document_id
        else None,
        "error": {"code": run.error_code, "message": run.error_message} if run.error_code else None,
    }
    event_publish(
        organisation_id=run.organisation_id, type=RUN_EVENTS[run.status], data=data, in_request=True
    )


def document_deleted_publish(document: Document) -> None:
    """The pipeline's listener of deleted documents (pipeline/events.py)."""
    data = {
        "document_id": str(document.id),
        "filename": document.filename,
        "deleted_by": document.deleted_by,
        "document_url": api_url("document_get", document_id=document.id),
    }
    event_publish(
        organisation_id=document.organisation_id,
        type=EventType.DOCUMENT_DELETED,
        data=data,
        in_request=True,
    )
