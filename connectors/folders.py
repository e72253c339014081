"""What the sync keeps of a connection's folders (`ConnectionFolder`): each folder's id,
parent id and name as of the last page recorded.

A provider whose listings report a moved or renamed folder but nothing under it
(Microsoft Graph's delta) reads them to tell what moved: in, out, or within the
connected folder. The sync writes them in the transaction that records the page they
came with, so they never say more than the imports do.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from django.db.models import Max

from connectors.base import RemoteFolder
from connectors.models import Connection, ConnectionFolder, ConnectorImport

# Deeper than any real folder tree; a cycle in what was stored stops here.
MAX_DEPTH = 128


@dataclass(frozen=True)
class KnownFolder:
    parent_id: str
    name: str


class FolderStore:
    """The folders recorded for one connection, as one sync reads them: cached, and
    updated with what the sync's own pages will record (`note`)."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self._known: dict[str, KnownFolder | None] = {}

    def known(self, ids: Iterable[str]) -> dict[str, KnownFolder]:
        """{id: what was recorded} for those of `ids` that are recorded."""
        ids = list(dict.fromkeys(ids))
        missing = [i for i in ids if i not in self._known]
        if missing:
            rows = ConnectionFolder.objects.filter(
                connection=self.connection, item_id__in=missing
            ).values_list("item_id", "parent_id", "name")
            found = {item_id: KnownFolder(parent, name) for item_id, parent, name in rows}
            for item_id in missing:
                self._known[item_id] = found.get(item_id)
        return {i: known for i in ids if (known := self._known[i]) is not None}

    def populated(self) -> bool:
        """Whether a listing ever recorded the connected folder (and so its tree): not for
        connections made before folders were kept."""
        return bool(self.known([self.connection.folder_id]))

    def names(self, item_id: str) -> list[str] | None:
        """The names from the connected folder down to `item_id` (itself included), by the
        recorded parents; None if the chain does not reach the connected folder."""
        names: list[str] = []
        current = item_id
        for _ in range(MAX_DEPTH):
            if current == self.connection.folder_id:
                return list(reversed(names))
            known = self.known([current]).get(current)
            if known is None:
                return None
            names.append(known.name)
            current = known.parent_id
        return None

    def descendants(self, ids: Iterable[str], *, parents_now: Mapping[str, str | None]) -> set[str]:
        """The recorded folders under `ids`, all levels down; one that the listing already
        showed under another parent (`parents_now`) moved away, with what is under it."""
        found: set[str] = set()
        frontier = set(ids)
        for _ in range(MAX_DEPTH):
            if not frontier:
                break
            rows = ConnectionFolder.objects.filter(
                connection=self.connection, parent_id__in=list(frontier)
            ).values_list("item_id", "parent_id")
            frontier = set()
            for item_id, parent in rows:
                if item_id in found or parents_now.get(item_id, parent) != parent:
                    continue
                found.add(item_id)
                frontier.add(item_id)
        return found

    def note(self, folders: Iterable[RemoteFolder]) -> None:
        """What the sync's pages will record, so that its later pages compare with it."""
        for folder in folders:
            self._known[folder.folder_id] = (
                None if folder.gone else KnownFolder(folder.parent_id, folder.name)
            )


def folders_record(*, connection: Connection, folders: list[RemoteFolder], now) -> list[str]:
    """Save what a page says of folders (the caller's transaction records the page's
    files too). The last word on a folder counts. Returns the paths of folders deleted
    with their contents."""
    last: dict[str, RemoteFolder] = {}
    for folder in folders:
        last.pop(folder.folder_id, None)
        last[folder.folder_id] = folder
    gone = [f.folder_id for f in last.values() if f.gone]
    if gone:
        ConnectionFolder.objects.filter(connection=connection, item_id__in=gone).delete()
    kept = [
        ConnectionFolder(
            connection=connection,
            item_id=f.folder_id,
            parent_id=f.parent_id,
            name=f.name[:1024],
            seen_at=now,
        )
        for f in last.values()
        if not f.gone
    ]
    if kept:
        ConnectionFolder.objects.bulk_create(
            kept,
            batch_size=500,
            update_conflicts=True,
            unique_fields=["connection", "item_id"],
            update_fields=["parent_id", "name", "seen_at"],
        )
    return [f.deleted_path for f in last.values() if f.gone and f.deleted_path]


def files_left_under(*, connection: Connection, paths: list[str], since) -> list[str]:
    """The files recorded (by their latest import) under one of `paths`, not deleted, and
    not listed since `since`: under a folder deleted with them, although the listing did
    not say so of each."""
    prefixes = _outermost(path.rstrip("/") + "/" for path in paths)
    candidates: set[str] = set()
    for prefix in prefixes:
        candidates.update(
            ConnectorImport.objects.filter(connection=connection, path__startswith=prefix)
            .exclude(state=ConnectorImport.State.DELETED)
            .values_list("file_id", flat=True)
        )
    if not candidates:
        return []
    latest = (
        ConnectorImport.objects.filter(connection=connection, file_id__in=list(candidates))
        .values("file_id")
        .annotate(last=Max("id"))
        .values_list("last", flat=True)
    )
    rows = ConnectorImport.objects.filter(id__in=list(latest), seen_at__lt=since).exclude(
        state=ConnectorImport.State.DELETED
    )
    return [
        file_id
        for file_id, path in rows.values_list("file_id", "path")
        if any(path.startswith(prefix) for prefix in prefixes)
    ]


def _outermost(prefixes) -> list[str]:
    """The prefixes not under another of them: a tree deleted at once is reported folder
    by folder, and its root's prefix already covers the rest (one query, not one each)."""
    kept: list[str] = []
    for prefix in sorted(set(prefixes)):
        if not kept or not prefix.startswith(kept[-1]):
            kept.append(prefix)
    return kept


def folders_forget_unseen(*, connection: Connection, since) -> int:
    """After a restarted listing completed: folders it did not list are gone."""
    return ConnectionFolder.objects.filter(connection=connection, seen_at__lt=since).delete()[0]
