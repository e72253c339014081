"""A local (or mounted) folder, polled: every file below it, by its relative path.

A file's version is its size, modification time (ns) and a SHA-256 of its bytes.
A file with more than one hard link is never read: the other link may be anywhere on
the file system (a file outside the folder that someone linked in), and nothing tells
where. It is reported with FILE_HARD_LINKED instead (connectors/problems.py), and read
once it is the folder's alone again.
A file is listed only once it has stopped changing: the same size and mtime in
two polls at least STABLE_SECONDS apart, and again after its
bytes were hashed. The folder is only ever read: files are opened read-only
without following links, and nothing is written, moved or deleted there.

The cursor is this provider's memory between polls (JSON): the version of every
file listed, and the files seen changing, with when they were first seen so.
"""

import errno
import hashlib
import json
import logging
import os
import stat
import time
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import BinaryIO

from connectors.base import ChangePage, FolderRefused, ProviderError, RemoteFile
from connectors.local_roots import local_folder_check
from connectors.models import Connection
from connectors.problems import FILE_HARD_LINKED, FILE_NAME_NOT_UTF8, Problem
from pipeline.errors import PermanentError

logger = logging.getLogger(__name__)

# Files listed per page (each page is recorded in one transaction).
PAGE_SIZE = 500
HASH_BLOCK = 1024 * 1024
# A file is imported once its size and modification time stayed the same this long.
STABLE_SECONDS = 2.0
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
# Non-blocking only for the open: a FIFO put where the file was then opens at once.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK


def _shown(relative: str) -> str:
    """The path as it can be stored: as it is, or with its undecodable bytes escaped.

    A name the file system gives as bytes that are not UTF-8 (a Latin-1 name on an old
    share, say) cannot be stored or shown as it is: it is shown with those bytes escaped
    ("caf\\xe9.pdf") and its import fails with FILE_NAME_NOT_UTF8, so the rest of the
    folder imports."""
    try:
        relative.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(relative).decode("utf-8", "backslashreplace")
    return relative


def _through_link(path: str) -> bool:
    """Whether `path` or a folder above it is a link now (to say why it is refused)."""
    current = PurePosixPath(path)
    return any(os.path.islink(p) for p in [current, *current.parents])


def _skipped(name: str) -> bool:
    # Hidden files, and the lock files editors keep next to an open document ("~$x.docx").
    return name.startswith((".", "~$"))


def open_folder(path: str) -> int:
    """A descriptor of the folder at the absolute `path`, opened from / one component at
    a time without following a link: a folder on the way that is a link (swapped in
    after any check) is refused (OSError), never followed. The one walk through folders
    here: a connection's folder, and the folder of a file below it."""
    parts = PurePosixPath(path).parts
    if not parts or parts[0] != "/":
        raise FileNotFoundError(path)
    folder = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for part in parts[1:]:
            inner = os.open(part, _FOLDER_FLAGS, dir_fd=folder)
            os.close(folder)
            folder = inner
    except BaseException:
        os.close(folder)
        raise
    return folder


class HardLinked(OSError):
    """The file has more than one hard link: it is not read."""


def _open_file(folder: int, name: str) -> int:
    """A read-only descriptor of the regular file `name` in the folder `folder`, not
    following a link; FileNotFoundError for anything else (a FIFO would block), and
    HardLinked for a file with another hard link, as it is once opened."""
    try:
        # Reading leaves even the access time as it was, where we own the file.
        fd = os.open(name, _FILE_FLAGS | getattr(os, "O_NOATIME", 0), dir_fd=folder)
    except PermissionError:
        fd = os.open(name, _FILE_FLAGS, dir_fd=folder)  # O_NOATIME needs the owner
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise FileNotFoundError(name)
    if info.st_nlink > 1:
        os.close(fd)
        raise HardLinked(name)
    os.set_blocking(fd, True)
    return fd


class LocalFolderProvider:
    name = "local"

    def _root(self, connection: Connection) -> int:
        """The connection's folder, checked against the roots this server may read and
        opened without following links."""
        root = local_folder_check(connection.folder_id)
        try:
            return open_folder(root)
        except FileNotFoundError:
            raise ProviderError(
                f"The folder {root} does not exist.", kind=Problem.FOLDER_MISSING
            ) from None
        except PermissionError:
            raise ProviderError(
                f"The folder {root} cannot be read.", kind=Problem.FOLDER_MISSING
            ) from None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _through_link(root):
                raise FolderRefused(
                    f"The folder {root} was replaced by a link (or a folder above it was); "
                    "links are not followed."
                ) from None
            raise ProviderError(
                f"The folder {root} is not a folder or cannot be opened ({exc.strerror}).",
                kind=Problem.FOLDER_MISSING,
            ) from None

    def _walk(self, root: int) -> Iterator[tuple[str, str, int, os.stat_result]]:
        """(relative path, name, descriptor of its folder, stat) of every regular file
        below the folder `root`, walked by descriptors: no link is followed, and a folder
        swapped for a link while walking is left out (os.fwalk compares what it opened
        with what it listed)."""

        def failed(error: OSError) -> None:
            raise ProviderError(f"The folder {error.filename} cannot be read: {error.strerror}.")

        walk = os.fwalk(".", onerror=failed, follow_symlinks=False, dir_fd=root)
        for folder, subfolders, files, folder_fd in walk:
            subfolders[:] = sorted(d for d in subfolders if not _skipped(d))
            for name in sorted(files):
                if _skipped(name):
                    continue
                try:
                    info = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue  # removed while listing: the next poll sees it gone
                if stat.S_ISREG(info.st_mode):
                    relative = os.path.normpath(os.path.join(folder, name))
                    yield relative.replace(os.sep, "/"), name, folder_fd, info

    def _hash(self, folder: int, name: str, relative: str) -> tuple[str, os.stat_result] | None:
        """The SHA-256 of the file and its stat once read; None if it cannot be read."""
        digest = hashlib.sha256()
        try:
            with os.fdopen(_open_file(folder, name), "rb") as fh:
                while block := fh.read(HASH_BLOCK):
                    digest.update(block)
                after = os.fstat(fh.fileno())
        except FileNotFoundError:
            return None
        except OSError as exc:
            # One unreadable file (permissions, a link) must not stop the folder's sync;
            # it stays unlisted until it can be read.
            logger.warning("cannot read %s: %s", relative, exc)
            return None
        return digest.hexdigest(), after

    def changes(self, connection: Connection, cursor: str | None) -> Iterator[ChangePage]:
        root = self._root(connection)
        try:
            changed, state, restarted = self._listing(root, cursor)
        finally:
            os.close(root)
        pages = [changed[i : i + PAGE_SIZE] for i in range(0, len(changed), PAGE_SIZE)] or [[]]
        for number, files in enumerate(pages):
            last = number == len(pages) - 1
            yield ChangePage(
                files=files,
                cursor=json.dumps(state, separators=(",", ":")) if last else None,
                restarted=restarted and number == 0,
            )

    def _listing(self, root: int, cursor: str | None) -> tuple[list[RemoteFile], dict, bool]:
        """What changed in the folder `root` since `cursor`: (files, the next cursor's
        state, whether the listing started from nothing)."""
        try:
            state = json.loads(cursor) if cursor else None
        except ValueError:
            state = None
        restarted = state is None
        state = state or {"files": {}, "pending": {}}
        listed: dict = state["files"]
        pending: dict = state["pending"]
        now = time.time()
        stable_after = STABLE_SECONDS
        changed: list[RemoteFile] = []
        present: set[str] = set()
        next_pending: dict = {}
        for relative, name, folder, info in self._walk(root):
            present.add(relative)
            shape = [info.st_size, info.st_mtime_ns]
            shown = _shown(relative)
            problem = ""
            if shown != relative:
                problem = FILE_NAME_NOT_UTF8
            elif info.st_nlink > 1:
                problem = FILE_HARD_LINKED
            known = listed.get(relative)
            # One reported for a problem (listed without a version) is looked at again
            # once it has none.
            if known is not None and known[:2] == shape and (known[2] or problem):
                continue
            if problem:  # reported once per size and mtime, never opened
                listed[relative] = [*shape, ""]
                changed.append(
                    RemoteFile(
                        file_id=shown,
                        version=f"{info.st_size}-{info.st_mtime_ns}",
                        name=PurePosixPath(shown).name,
                        path=shown,
                        size=info.st_size,
                        problem=problem,
                    )
                )
                continue
            seen = pending.get(relative)
            if seen is None or seen[:2] != shape:
                # New or still changing: wait for it to stay the same.
                next_pending[relative] = [*shape, now]
                continue
            if now - seen[2] < stable_after:
                next_pending[relative] = seen
                continue
            hashed = self._hash(folder, name, relative)
            if hashed is None:
                next_pending[relative] = [*shape, now]
                continue
            digest, after = hashed
            if [after.st_size, after.st_mtime_ns] != shape:
                next_pending[relative] = [after.st_size, after.st_mtime_ns, now]
                continue
            version = f"{info.st_size}-{info.st_mtime_ns}-{digest[:32]}"
            listed[relative] = [*shape, version]
            changed.append(
                RemoteFile(
                    file_id=relative,
                    version=version,
                    name=PurePosixPath(relative).name,
                    path=relative,
                    size=info.st_size,
                )
            )
        for relative in sorted(set(listed) - present):
            del listed[relative]
            shown = _shown(relative)
            name = PurePosixPath(shown).name
            changed.append(
                RemoteFile(file_id=shown, version="", name=name, path=shown, deleted=True)
            )
        return changed, {"files": listed, "pending": next_pending}, restarted

    @staticmethod
    def open_path(root: str, relative: str) -> BinaryIO:
        """Open a regular file below `root` read-only, refusing links and paths that leave
        it. The root and then the path are walked one folder at a time, each opened
        without following a link (openat), so a folder on the way swapped for a link after
        the listing is refused, not followed; and something swapped in for the file that
        is not a regular file (a FIFO would block the reader) is refused without waiting, as
        is a file with another hard link (a PermanentError: retrying cannot help)."""
        parts = PurePosixPath(relative).parts
        if not parts or PurePosixPath(relative).is_absolute() or ".." in parts:
            raise FileNotFoundError(relative)
        # The root and the file's folders are one walk from /, one component at a time.
        folder = open_folder(str(PurePosixPath(root, *parts[:-1])))
        try:
            fd = _open_file(folder, parts[-1])
        except HardLinked:
            raise PermanentError(FILE_HARD_LINKED, code="download_refused") from None
        finally:
            os.close(folder)
        return os.fdopen(fd, "rb")

    def open(self, connection: Connection, file_id: str) -> BinaryIO:
        """The file's bytes, if this server may still read the connection's folder."""
        return self.open_path(local_folder_check(connection.folder_id), file_id)

    def maintain(self, connection: Connection) -> None:
        """Nothing to keep up: no tokens, no subscriptions."""

    def disconnect(self, connection: Connection, *, credentials: dict, state: dict) -> str:
        """Nothing kept outside Paperlane."""
        return ""
