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
refused, never followed. A file inside with more than one hard link is not read either
(the other link may be outside every root), at listing and at download.

Why a folder is refused is said to the operator connecting it without naming the
server's other folders; the roots and paths concerned go to the log and to the sync's
error in the admin. Members are only told that the server may not read the folder
(Problem.FOLDER_REFUSED, connectors/problems.py).
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


@dataclass(frozen=True)
class Refusal:
    """Why this server may not read a folder, twice: `plain` for the operator connecting
    it (the connect page, `connect_folder`), which names the rule broken but not the
    server's other folders; `detail` for the log and the admin, with the roots and the
    paths concerned. Members read neither: they are told the FOLDER_REFUSED problem."""

    plain: str
    detail: str


def local_folder_refusal(folder: str) -> Refusal | None:
    """Why this server may not read `folder` (a real, absolute path); None if it may."""
    roots = local_folder_roots()
    if not roots:
        plain = (
            "This server reads no local folders: an operator must first name the folders "
            "it may read in PAPERLANE_LOCAL_FOLDER_ROOTS."
        )
        return Refusal(plain, plain)
    if _real(folder) != folder:
        plain = f"{folder} is (or goes through) a link; only real folders are read."
        return Refusal(plain, f"{plain} It leads to {_real(folder)}.")
    within = [root for root in roots if _inside(folder, root)]
    if not within:
        outside = f"{folder} is outside the folders this server may read"
        return Refusal(
            f"{outside} (PAPERLANE_LOCAL_FOLDER_ROOTS).",
            f"{outside} (PAPERLANE_LOCAL_FOLDER_ROOTS: {', '.join(roots)}).",
        )
    base = _real(settings.BASE_DIR)
    if _inside(base, folder):
        plain = f"{folder} holds Paperlane's own installation, which is never connected."
        return Refusal(plain, f"{plain} The installation is {base}.")
    for protected in protected_folders():
        if _inside(folder, protected.path):
            plain = f"{folder} is inside {protected.what}, which is never connected."
            return Refusal(plain, f"{plain} That is {protected.path}.")
        if _inside(protected.path, folder):
            plain = f"{folder} holds {protected.what}, which is never connected."
            return Refusal(plain, f"{plain} That is {protected.path}.")
    if _inside(folder, base) and not any(_inside(root, base) and root != base for root in within):
        plain = (
            f"{folder} is inside Paperlane's own installation; only a root named beneath it "
            "in PAPERLANE_LOCAL_FOLDER_ROOTS may be connected there."
        )
        return Refusal(plain, f"{plain} The installation is {base}.")
    return None


def local_folder_check(folder: str) -> str:
    """`folder` if this server may read it; FolderRefused if not, whose message is the
    refusal's detail (for operators: the sync's error in the admin, the log)."""
    refusal = local_folder_refusal(folder)
    if refusal:
        raise FolderRefused(refusal.detail)
    return folder
