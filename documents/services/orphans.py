"""Stored files no document points to.

The accept path writes a document's bytes to their key before the transaction
that creates the Document commits, so a web worker killed in between leaves a
file behind; so does deleting documents (or an organisation), and a deleted
document's files that the store refused to delete then. A connector's
store writes each version under a key of its own (`document_write_key`) and
points the document at it when it commits: the loser of two runs of one file, a
worker killed before its commit, and a version replaced by a newer one leave such
keys behind too. These files are only found by walking the storage.

This assumes the storage (MEDIA_ROOT or the bucket) belongs to this database
alone: a file written by another deployment has no Document here either.
"""

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from itertools import islice

from documents.models import Document, PendingUpload
from documents.storage import (
    KEYS_ROOT,
    DocumentKey,
    document_key_parse,
    storage_delete,
    storage_modified_at,
    stored_keys,
)

logger = logging.getLogger(__name__)

# Document keys looked up in the database with one query.
LOOKUP_BATCH = 500


@dataclass(frozen=True)
class OrphanPass:
    removed: int
    # Where the next pass goes on: the last key examined, or "" when this pass reached
    # the end of the storage (the next one starts again from the first key).
    resume_after: str


def stored_orphans_remove(
    *, older_than: datetime, limit: int, examine: int, after: str = ""
) -> OrphanPass:
    """Delete stored document files whose document does not exist or was deleted and
    that were last written before `older_than`, looking at the keys after `after` in key
    order; stop after `limit` orphans or `examine` keys, whichever comes first. An
    orphan the storage refuses to delete is logged and passed over (the next walk tries
    it again).

    Kept: every file at a document's stable key whose document id has a Document row
    not deleted (whatever its version or current key), every file at a key of one write
    that is its document's current key, every file written at or after `older_than` (an
    accept or a store may be about to commit it), every file at the key of a direct
    upload (its document is made when it is completed; the sweeper removes it when it
    expires) and every key that is not exactly a document key.
    """
    walk = _Walk(stored_keys(under=KEYS_ROOT, after=after), examine=examine)
    removed, handled = 0, []
    for key in islice(_orphans_written_before(walk.document_keys(), older_than), limit):
        handled.append(key.key)
        try:
            storage_delete(key=key.key)
        except Exception:  # a key the storage will not delete must not stop the walk
            logger.exception("could not delete the orphaned file %s; the next walk tries", key.key)
            continue
        removed += 1
    if len(handled) == limit:
        # Stopped by the limit, maybe within a batch: go on after the last one handled.
        resume_after = handled[-1] if handled else after
    else:
        resume_after = "" if walk.ended else walk.last
    return OrphanPass(removed=removed, resume_after=resume_after)


class _Walk:
    """The storage's keys, at most `examine` of them, remembering how far it got."""

    def __init__(self, keys: Iterator[str], *, examine: int) -> None:
        self._keys = keys
        self._examine = examine
        self.examined = 0
        self.last = ""
        self.ended = False

    def document_keys(self) -> Iterator[DocumentKey]:
        for key in self._keys:
            self.examined += 1
            self.last = key
            parsed = document_key_parse(key)
            if parsed is not None:
                yield parsed
            if self.examined >= self._examine:
                return
        self.ended = True


def _orphans_written_before(keys: Iterable[DocumentKey], moment: datetime) -> Iterator[DocumentKey]:
    for batch in _batches(keys, size=LOOKUP_BATCH):
        for key in _unreferenced(batch):
            # Asked only now, for the few keys without a document: a HEAD each on S3.
            modified_at = storage_modified_at(key=key.key)
            if modified_at is not None and modified_at < moment:
                yield key


def _unreferenced(keys: list[DocumentKey]) -> list[DocumentKey]:
    """The keys whose document is gone and the keys of one write (a connector's store)
    that their document does not point to: only the committed row points at those. A
    deleted document's files are kept by nothing (its deletion removes them; what the
    store refused then is found here)."""
    ids = {key.document_id for key in keys}
    live = Document.objects.filter(id__in=ids, deleted_at__isnull=True)
    current = dict(live.values_list("id", "storage_key"))
    unreferenced = [
        key
        for key in keys
        if key.document_id not in current or (key.write and current[key.document_id] != key.key)
    ]
    if not unreferenced:
        return []
    # A direct upload's bytes wait at its document's key until it is completed or expires.
    waiting = PendingUpload.objects.filter(storage_key__in=[key.key for key in unreferenced])
    uploads = set(waiting.values_list("storage_key", flat=True))
    return [key for key in unreferenced if key.key not in uploads]


def _batches(items: Iterable, *, size: int) -> Iterator[list]:
    iterator = iter(items)
    while batch := list(islice(iterator, size)):
        yield batch
