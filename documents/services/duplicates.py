"""Bytes an organisation already has: the one lookup every way a file comes in asks
(pipeline/services/accept.py for uploads, connectors/source.py for connected folders)
before it keeps and charges a file again.

A file is a duplicate of the organisation's live (not deleted) document whose current
version has the same SHA-256. The digest is the one taken as the bytes arrive, so
nothing is read again for it. Asked inside the transaction that records the file, the
lookup first takes a transaction lock on (organisation, SHA-256): of two transactions
recording the same bytes at once, the second looks only once the first has committed,
and finds its document. Redis is not asked: the database is the truth.
"""

import uuid

from django.db import connection

from documents.models import Document

# One lock per organisation and digest, held to the end of the recording transaction.
_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"


def document_duplicate_of(
    *,
    organisation_id: int,
    sha256: str,
    exclude_document_id: uuid.UUID | None = None,
    locked: bool = False,
) -> Document | None:
    """The organisation's oldest live document whose current bytes have this `sha256`
    (other than `exclude_document_id`), or None. `locked`: looked up under the lock
    described above, held until the caller's transaction (it must be in one) ends; without
    it, a quick look that spares the work of a file found there, not a guarantee."""
    if locked:
        assert connection.in_atomic_block, "the lock lasts as long as a transaction"
        with connection.cursor() as cursor:
            cursor.execute(_LOCK, [f"duplicate:{organisation_id}:{sha256}"])
    found = Document.objects.filter(
        organisation_id=organisation_id, sha256=sha256, deleted_at__isnull=True
    )
    if exclude_document_id is not None:
        found = found.exclude(id=exclude_document_id)
    return found.order_by("created_at", "id").first()
