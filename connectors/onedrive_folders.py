"""OneDrive folders: the one a person connects, which items are in it, and what a moved
folder held.

`folder_resolve` finds the folder a person names by its path, with the tokens of the
sign-in they just made.

Delta items carry no `parentReference.path`, and "renaming a folder doesn't result
in any descendants of the folder being returned from delta"; "when using delta you
should always track items by id" (https://learn.microsoft.com/graph/api/driveitem-delta,
"Remarks"). The same holds for a folder moved: delta reports the folder alone. So:

- `Tree` places items by walking parent ids up to the connected folder.
- `FolderChanges` compares each folder of an incremental listing with what the sync
  recorded of it (`connectors/folders.py`). A folder in the connected folder
  whose parent or name changed, or that was never recorded (moved in, or new), is
  listed with `children` (https://learn.microsoft.com/graph/api/driveitem-list-children),
  all levels down, and its files are reported as the listing's own: imported, or their
  paths follow. A recorded folder now outside is listed too, and its files reported
  deleted. A recorded folder deleted is forgotten, and the files recorded under it go
  with it, whether or not the listing names each one.
- One sync lists at most WALK_MAX_ITEMS items that way; past it
  `WalkTooLong` is raised and the provider enumerates the drive from scratch, which
  reconciles everything (nothing is dropped silently).
"""

import urllib.parse
from collections import deque
from collections.abc import Iterator
from typing import Any

from connectors.base import ChangePage, ProviderError, RemoteFile, RemoteFolder
from connectors.folders import MAX_DEPTH, FolderStore, KnownFolder
from connectors.models import Connection
from connectors.onedrive_graph import GraphClient, OneDriveConfig, Tokens, status_problem
from connectors.onedrive_items import as_delta_lists_it, gone_file, item_file

# What a walk asks of each child; the same facets delta gives (Graph's page size, 200,
# is the most `children` answers in one page).
CHILD_FIELDS = "id,name,size,cTag,eTag,file,folder,root,deleted,parentReference"
CHILDREN_PAGE = 200
# Graph's delta reports a folder moved or renamed, not what is under it, so the sync lists
# such a folder's contents itself; one sync lists at most this many items that way. Past
# it, the sync enumerates the whole drive again instead (and reconciles at its end).
WALK_MAX_ITEMS = 10_000


class WalkTooLong(Exception):
    """A sync's folder walks listed more items than WALK_MAX_ITEMS."""


def _quoted(item_id: str) -> str:
    return urllib.parse.quote(item_id, safe="!")


def folder_resolve(*, config: OneDriveConfig, tokens: Tokens, path: str) -> tuple[str, str]:
    """(drive id, folder item id) of `path` in the signed-in person's OneDrive; a
    ProviderError that says why in plain words if it is missing or not a folder."""

    def source(stale: Tokens | None) -> Tokens:
        # Minutes old: a refusal here means the sign-in did not work.
        if stale is not None:
            raise ProviderError("Microsoft refused the new sign-in; connect again.")
        return tokens

    client = GraphClient(config=config, tokens=source)
    drive = client.get_json(client.url("/me/drive"))
    drive_id = _quoted(str(drive.get("id", "")))
    if path == "/":
        url = client.url(f"/drives/{drive_id}/root")
    else:
        url = client.url(f"/drives/{drive_id}/root:{urllib.parse.quote(path, safe='/')}")
    answer = client.call("GET", url)
    if answer.status == 404:
        raise ProviderError(f"There is no folder {path} in your OneDrive.")
    if answer.status != 200:
        raise ProviderError(f"OneDrive answered {answer.status} looking for {path}.")
    item = answer.json()
    if "folder" not in item and "root" not in item:
        raise ProviderError(f"{path} is a file in your OneDrive, not a folder.")
    return str(drive["id"]), str(item["id"])


class Tree:
    """Which items are under the connected folder, by walking parent ids (delta gives
    no paths). Folders seen in the listing are remembered; a parent not seen is fetched."""

    def __init__(self, client: GraphClient, drive: str, folder_id: str, folder_path: str) -> None:
        self.client = client
        self.drive = drive
        self.folder_id = folder_id
        self.folder_path = folder_path.rstrip("/")
        self.parents: dict[str, str | None] = {}
        self.names: dict[str, str] = {}
        # The drive's type as the listing's items tell it ("personal", "business", ...).
        self.drive_type: str | None = None

    def learn(self, item: dict[str, Any]) -> None:
        reference = item.get("parentReference") or {}
        self.drive_type = reference.get("driveType") or self.drive_type
        if "deleted" in item:
            return
        self.parents[item["id"]] = None if "root" in item else reference.get("id")
        self.names[item["id"]] = str(item.get("name", ""))

    def _fetch(self, item_id: str) -> bool:
        answer = self.client.call(
            "GET",
            self.client.url(
                f"/drives/{self.drive}/items/{_quoted(item_id)}"
                "?$select=id,name,parentReference,root"
            ),
        )
        if answer.status == 404:
            return False
        if answer.status != 200:
            raise ProviderError(
                f"OneDrive answered {answer.status} for a folder.",
                kind=status_problem(answer.status),
            )
        self.learn(answer.json())
        return True

    def relative(self, parent_id: str | None) -> list[str] | None:
        """The folder names from the connected folder down to `parent_id`; None if outside."""
        names: list[str] = []
        current = parent_id
        for _ in range(MAX_DEPTH):
            if current is None:
                return None
            if current == self.folder_id:
                return list(reversed(names))
            if current not in self.parents and not self._fetch(current):
                return None
            names.append(self.names.get(current, ""))
            current = self.parents.get(current)
        return None

    def path(self, relative: list[str], name: str) -> str:
        return "/".join([self.folder_path, *relative, name])


# A folder to list: its id, and the names from the connected folder down to it (itself
# included); None when it is outside the connected folder now.
Walk = tuple[str, list[str] | None]


class FolderChanges:
    """One listing's folders: what to record of them, and the walks that report what
    moved with them. Walks never list a folder twice in one sync."""

    def __init__(
        self, *, client: GraphClient, drive: str, connection: Connection, tree: Tree
    ) -> None:
        self.client = client
        self.drive = drive
        self.tree = tree
        self.folder_id = connection.folder_id
        self.store = FolderStore(connection)
        self.limit = WALK_MAX_ITEMS
        # Items listed by walks in this sync (bounded by `limit`).
        self.listed = 0
        self.walked: set[str] = set()
        # Folders whose walk found them gone: recorded gone by the walk, not again.
        self.vanished: set[str] = set()

    def plan(
        self, items: list[dict[str, Any]], *, incremental: bool
    ) -> tuple[list[RemoteFolder], list[Walk]]:
        """For a page's folders (learnt by the tree already): what to record of them with
        the page, and the folders to walk first (an incremental listing's only)."""
        records: list[RemoteFolder] = []
        walks: list[Walk] = []
        known = self.store.known(item["id"] for item in items)
        for item in items:
            folder_id = item["id"]
            before = known.get(folder_id)
            if "deleted" in item:
                if before is not None:
                    records += self._forget(folder_id, deleted=True)
                continue
            parent = (item.get("parentReference") or {}).get("id") or ""
            name = str(item.get("name", ""))
            if folder_id == self.folder_id:
                # The connected folder itself: what is under it stays under it.
                records.append(RemoteFolder(folder_id, parent, name))
                continue
            relative = self.tree.relative(parent or None)
            if relative is not None:
                records.append(RemoteFolder(folder_id, parent, name))
                # Moved in (or new), moved within or renamed: what is under it too.
                changed = before != KnownFolder(parent, name)
                if incremental and changed and self._first_walk(folder_id):
                    walks.append((folder_id, [*relative, name]))
            elif before is not None:
                # Moved out of the connected folder, with everything under it.
                records += self._forget(folder_id, deleted=False)
                if incremental and self._first_walk(folder_id):
                    walks.append((folder_id, None))
        return records, walks

    def _first_walk(self, folder_id: str) -> bool:
        if folder_id in self.walked:
            return False
        self.walked.add(folder_id)
        return True

    def _forget(self, folder_id: str, *, deleted: bool) -> list[RemoteFolder]:
        """The folder and every folder recorded under it, gone; a deleted one takes the
        files recorded under its path with it."""
        under = ""
        if deleted:
            names = self.store.names(folder_id)
            under = self.tree.path(names, "") if names is not None else ""
        below = self.store.descendants([folder_id], parents_now=self.tree.parents)
        return [
            RemoteFolder(folder_id, gone=True, deleted_path=under),
            *(RemoteFolder(d, gone=True) for d in sorted(below)),
        ]

    def settled(self, records: list[RemoteFolder]) -> list[RemoteFolder]:
        """The page's own records, but of folders a walk found gone (it recorded them)."""
        kept = [r for r in records if r.folder_id not in self.vanished]
        self.store.note(kept)
        return kept

    def walk(self, folder_id: str, names: list[str] | None) -> Iterator[ChangePage]:
        """List the folder and every folder under it; a page for each answer of Graph's.
        Inside the connected folder (`names`): its files at their paths and its folders
        recorded; outside (None): its files deleted and its folders forgotten."""
        queue: deque[Walk] = deque([(folder_id, names)])
        while queue:
            current, current_names = queue.popleft()
            listed = False
            for children in self._children(current):
                listed = True
                files: list[RemoteFile] = []
                folders: list[RemoteFolder] = []
                for child in children:
                    if "deleted" in child:
                        continue
                    name = str(child.get("name", ""))
                    if "folder" in child:
                        self.tree.learn(child)
                        if not self._first_walk(child["id"]):
                            continue
                        inside = None if current_names is None else [*current_names, name]
                        folders.append(
                            RemoteFolder(child["id"], current, name)
                            if inside is not None
                            else RemoteFolder(child["id"], gone=True)
                        )
                        queue.append((child["id"], inside))
                    elif current_names is None:
                        if "file" in child:
                            files.append(gone_file(child))
                    else:
                        item = as_delta_lists_it(child, drive_type=self.tree.drive_type)
                        found = item_file(item, self.tree.path(current_names, name))
                        if found is not None:
                            files.append(found)
                self.store.note(folders)
                if files or folders:
                    yield ChangePage(files=files, folders=folders)
            if not listed:
                # Gone since the listing named it (deleted meanwhile, most likely).
                self.vanished.add(current)
                gone = self._forget(current, deleted=True)
                self.store.note(gone)
                yield ChangePage(folders=gone)

    def _children(self, folder_id: str) -> Iterator[list[dict[str, Any]]]:
        """The folder's children, a page at a time; nothing if the folder is gone (404)."""
        url: str | None = self.client.url(
            f"/drives/{self.drive}/items/{_quoted(folder_id)}/children"
            f"?$select={CHILD_FIELDS}&$top={CHILDREN_PAGE}"
        )
        while url:
            # Through the connection's client: its timeouts, token refresh, Retry-After.
            answer = self.client.call("GET", url)
            if answer.status == 404:
                return
            if answer.status != 200:
                raise ProviderError(
                    f"OneDrive answered {answer.status} {answer.error_code()} listing a folder.",
                    kind=status_problem(answer.status),
                )
            data = answer.json()
            children = [c for c in data.get("value") or [] if isinstance(c, dict) and c.get("id")]
            self.listed += len(children)
            if self.listed > self.limit:
                raise WalkTooLong(f"more than {self.limit} items under moved folders")
            yield children
            url = data.get("@odata.nextLink")
