"""What one OneDrive item (a Graph driveItem) is to the sync: a file to import at a
path, under a content version, or nothing."""

from typing import Any

from connectors.base import RemoteFile
from formats.base import MEDIA_TYPES, kind_by_name

# Graph's answer when it cannot tell; the extract stage checks the bytes anyway.
UNTOLD = "application/octet-stream"


def mislabelled(item: dict[str, Any]) -> bool:
    """Named as a kind of ours but of another type by Graph's `file.mimeType` (a photo
    named .pdf)."""
    kind = kind_by_name(str(item.get("name", "")))
    mime = str((item.get("file") or {}).get("mimeType") or UNTOLD).lower()
    return kind is not None and mime not in (MEDIA_TYPES[kind], UNTOLD)


def content_version(item: dict[str, Any]) -> str:
    """cTag; where delta leaves it out (OneDrive for Business), a content hash; eTag last."""
    if item.get("cTag"):
        return str(item["cTag"])
    hashes = (item.get("file") or {}).get("hashes") or {}
    for name in ("quickXorHash", "sha256Hash", "sha1Hash"):
        if hashes.get(name):
            return f"{name}:{hashes[name]}"
    return f"eTag:{item.get('eTag', '')}"


def as_delta_lists_it(item: dict[str, Any], *, drive_type: str | None) -> dict[str, Any]:
    """An item listed some other way (a folder's `children`) as delta would list it, on a
    drive of `drive_type` (the item's own `parentReference.driveType` comes first).

    On OneDrive for Business and SharePoint, delta leaves cTag out of created and
    modified items (https://learn.microsoft.com/graph/api/driveitem-delta, "Remarks"),
    so their recorded version is a content hash; `children` gives a cTag. Without it
    here, a file listed by `children` would look like a new version, imported and
    charged again.
    """
    drive_type = (item.get("parentReference") or {}).get("driveType") or drive_type
    if drive_type in (None, "personal") or "cTag" not in item:
        return item
    return {key: value for key, value in item.items() if key != "cTag"}


def item_file(item: dict[str, Any], path: str) -> RemoteFile | None:
    """The file `item` is at `path`; None for a folder and for what is never imported
    (a .pdf that Graph says is an image). Other types pass: the sync records them as
    skipped, with why, for people."""
    if "file" not in item or "folder" in item or mislabelled(item):
        return None
    name = str(item.get("name", ""))
    return RemoteFile(
        file_id=item["id"],
        version=content_version(item),
        name=name,
        path=path,
        size=item.get("size"),
    )


def gone_file(item: dict[str, Any]) -> RemoteFile:
    """The file `item` no longer in the connected folder (deleted, or moved out)."""
    return RemoteFile(
        file_id=item["id"], version="", name=str(item.get("name", "")), path="", deleted=True
    )
