"""A deleted document's content: its text, chunks and stored files go; the row stays.

The row is kept (marked `deleted_at`, with who deleted it) because runs, their history
and the usage ledger point at it. Stopping the document's runs first is the pipeline's
part (`pipeline/services/deletion.py`).
"""

import logging

from django.db import transaction
from django.utils import timezone

from documents.models import Chunk, Document, DocumentText
from documents.services.vocabulary import vocabulary_change
from documents.storage import document_folder, storage_delete, stored_keys

logger = logging.getLogger(__name__)


@transaction.atomic(savepoint=False)
def document_mark_deleted(*, document: Document, deleted_by: str) -> None:
    """Mark the document deleted and remove its extracted text and chunks (out of search).
    Call with the document's row locked, after its runs were stopped."""
    vocabulary_change(document_id=document.id, version=None)
    now = timezone.now()
    document.deleted_at, document.deleted_by = now, deleted_by[:200]
    document.chunk_count = document.text_chars = 0
    document.searchable_version = None
    document.save(
        update_fields=[
            "deleted_at",
            "deleted_by",
            "searchable_version",
            "chunk_count",
            "text_chars",
            "updated_at",
        ]
    )
    Chunk.objects.filter(document=document).delete()
    DocumentText.objects.filter(document=document).delete()


def document_files_remove(*, document: Document) -> int:
    """Delete every stored version of a deleted document; returns how many files went.

    Best effort, after the deletion committed: a file the store will not delete now (S3
    down) is logged and left to the orphan sweep, which removes deleted documents' files.
    """
    folder = document_folder(organisation_id=document.organisation_id, document_id=document.id)
    removed = 0
    try:
        for key in list(stored_keys(under=folder)):
            storage_delete(key=key)
            removed += 1
    except Exception:  # the request has succeeded; the orphan sweep tries again
        logger.exception("could not delete the files of deleted document %s", document.id)
    return removed
