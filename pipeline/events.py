"""What the pipeline tells other apps, inside the transaction of the change: a run that
ended (succeeded, failed, dead-lettered, cancelled) and a document deleted.

An app that wants to know registers a listener from its `AppConfig.ready()`
(webhooks/apps.py); the pipeline never imports it. A listener writes in the caller's
transaction (an outbox row) and does nothing outside it: what it sends, it sends once
the transaction commits.
"""

from collections.abc import Callable

from documents.models import Document
from pipeline.models import ImportRun

RunListener = Callable[[ImportRun], None]
DocumentListener = Callable[[Document], None]

_RUN_ENDED: list[RunListener] = []
_DOCUMENT_DELETED: list[DocumentListener] = []


def run_ended_register(listener: RunListener) -> None:
    """Call `listener(run)` in the transaction that ends a run (its status the new one)."""
    _RUN_ENDED.append(listener)


def document_deleted_register(listener: DocumentListener) -> None:
    """Call `listener(document)` in the transaction that deletes a document."""
    _DOCUMENT_DELETED.append(listener)


def run_ended(run: ImportRun) -> None:
    for listener in _RUN_ENDED:
        listener(run)


def document_deleted(document: Document) -> None:
    for listener in _DOCUMENT_DELETED:
        listener(document)
