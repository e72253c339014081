"""Which folders of this server a local connection may read.

Only folders inside one of PAPERLANE_LOCAL_FOLDER_ROOTS (empty by default: the local
provider reads nothing until an operator names roots), and never Paperlane's own:
MEDIA_ROOT (every organisation's stored originals, which would be imported into one
organisation), the project folder (BASE_DIR: code, settings, the demo database) except
a root named beneath it, the Python environment, the static files. A folder that holds
one of these is refused as well as one inside it.

A path given by a person is resolved once (links followed, `..` removed) and the real
path is what is checked and stored. The check is made again at every sync and every
download, on the stored path, and the folder is then opened one component at a time
without following links (connectors/local.py): a folder swapped for a link later is
refused, never followed.
"""

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from connectors.base import FolderRefused


@dataclass(frozen=True)
class Protected:
    path: str
    # For people: "Paperlane's stored documents (MEDIA_ROOT)".
    what: str


def _real(path: str | os.PathLike) -> str:
    return os.path.realpath(os.fspath(path))


def _inside(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or below it (both real, absolute paths)."""
    return path == folder or os.path.commonpath([path, folder]) == folder


def local_folder_roots() -> list[str]:
    """The real paths of PAPERLANE_LOCAL_FOLDER_ROOTS."""
    roots = []
    for root in settings.PAPERLANE_LOCAL_FOLDER_ROOTS:
        if not os.path.isabs(root):
            raise ImproperlyConfigured(
                f"PAPERLANE_LOCAL_FOLDER_ROOTS names {root!r}: each root must be an absolute path."
            )
        roots.append(_real(root))
    return roots


def protected_folders() -> list[Protected]:
    """Paperlane's own folders, never connected whatever the roots say (the project
    folder is the exception's owner: see `local_folder_refusal`)."""
    python = "Paperlane's Python environment"
    folders = [Protected(_real(settings.MEDIA_ROOT), "Paperlane's stored documents (MEDIA_ROOT)")]
    folders.append(Protected(_real(sys.prefix), python))
    folders.append(Protected(_real(Path(settings.BASE_DIR) / ".venv"), python))
    static = [*getattr(settings, "STATICFILES_DIRS", []), getattr(settings, "STATIC_ROOT", None)]
    folders += [Protected(_real(p), "Paperlane's static files") for p in static if p]
    return folders


def local_folder_resolve(path: str) -> str:
    """The real, absolute path of what a person typed (relative to the current folder)."""
    folder = Path(path).expanduser()
    if not folder.is_absolute():
        folder = Path.cwd() / folder
    return _real(folder)


def local_folder_refusal(folder: str) -> str | None:
    """Why this server may not read `folder` (a real, absolute path), in plain words;
    None if it may."""
    roots = local_folder_roots()
    if not roots:
        return (
            "This server reads no local folders: an operator must first name the folders "
            "it may read in PAPERLANE_LOCAL_FOLDER_ROOTS."
        )
    if _real(folder) != folder:
        return f"{folder} is (or goes through) a link; only real folders are read."
    within = [root for root in roots if _inside(folder, root)]
    if not within:
        return (
            f"{folder} is outside the folders this server may read "
            f"(PAPERLANE_LOCAL_FOLDER_ROOTS: {', '.join(roots)})."
        )
    base = _real(settings.BASE_DIR)
    if _inside(base, folder):
        return f"{folder} holds Paperlane's own installation ({base}), which is never connected."
    for protected in protected_folders():
        if _inside(folder, protected.path):
            return f"{folder} is inside {protected.what}, which is never connected."
        if _inside(protected.path, folder):
            return f"{folder} holds {protected.what}, which is never connected."
    if _inside(folder, base) and not any(_inside(root, base) and root != base for root in within):
        return (
            f"{folder} is inside Paperlane's own installation ({base}); only a root named "
            "beneath it in PAPERLANE_LOCAL_FOLDER_ROOTS may be connected there."
        )
    return None


def local_folder_check(folder: str) -> str:
    """`folder` if this server may read it; FolderRefused (with the reason) if not."""
    reason = local_folder_refusal(folder)
    if reason:
        raise FolderRefused(reason)
    return folder
