"""What every folder provider (OneDrive, local folder) gives the sync.

A provider lists what changed in a connection's folder since a cursor, page by
page, and fetches one file's bytes when the store stage asks for them. It
never decides what is imported: the sync records each file under its import
key (organisation, connection, file id, content version) and saves the cursor
only after a page's imports are recorded.
"""

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO, Protocol

from connectors.problems import Problem

if TYPE_CHECKING:
    from connectors.models import Connection

# How often each provider's upkeep (`Provider.maintain`) is called: what it keeps fresh
# must last at least this long past each call.
MAINTAIN_SECONDS = 60


@dataclass(frozen=True)
class RemoteFile:
    """One file as the provider sees it now."""

    # The provider's stable id of the file (a Graph item id; a local relative path).
    file_id: str
    # Changes whenever the content changes (a Graph cTag; size, mtime and hash locally).
    version: str
    name: str
    # Where it is, for people: the path under the connected folder.
    path: str
    size: int | None = None
    # The file was removed (or moved out of the folder) at the source.
    deleted: bool = False
    # Why the file cannot be imported whatever its type, if so, in words for members
    # (connectors/problems.py): its import is recorded as failed, with this as the reason.
    problem: str = ""


@dataclass(frozen=True)
class RemoteFolder:
    """A folder in the connected folder (or the connected folder itself) as the provider
    sees it now, remembered with the page it came with: a provider whose listings report
    a moved folder but not what is under it (Graph's delta) tells by these what moved."""

    folder_id: str
    parent_id: str = ""
    name: str = ""
    # No longer in the connected folder (deleted, or moved out): forgotten.
    gone: bool = False
    # Deleted with everything under it, which was recorded under this path: files still
    # recorded there and not listed since the sync began are deleted too.
    deleted_path: str = ""


@dataclass(frozen=True)
class ChangePage:
    """One page of changes and the cursor to save once they are recorded."""

    files: list[RemoteFile] = field(default_factory=list)
    # What the provider learnt of folders, saved in the same transaction as the files.
    folders: list[RemoteFolder] = field(default_factory=list)
    # Saved after this page's imports are recorded; None means "not yet": more pages follow.
    cursor: str | None = None
    # The provider restarted enumeration from nothing (Graph's 410 Gone): at the end
    # of this listing, files imported before and not seen again were deleted.
    restarted: bool = False


class Provider(Protocol):
    name: str

    def changes(self, connection: "Connection", cursor: str | None) -> Iterator[ChangePage]:
        """The changes since `cursor` (None: everything), page by page."""
        ...

    def open(self, connection: "Connection", file_id: str) -> BinaryIO:
        """The file's current bytes, fetched now (download URLs are never stored)."""
        ...

    def maintain(self, connection: "Connection") -> None:
        """Periodic upkeep: refresh tokens, renew change-notification subscriptions."""
        ...

    def disconnect(self, connection: "Connection", *, credentials: dict, state: dict) -> str:
        """Undo what the provider keeps for the connection outside Paperlane (a change
        notification subscription), with the credentials and state it had just before
        they were deleted. Best effort, quick (a person waits); returns a note for the
        connection's history ("" when there was nothing to undo)."""
        ...


class ProviderError(Exception):
    """A sync could not go on: `message` (technical, for operators) and `kind` (one of
    Problem, which members are told in plain words)."""

    kind = Problem.UNKNOWN

    def __init__(self, message: str, *, kind: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if kind:
            self.kind = kind


class NeedsReconnect(ProviderError):
    """Consent was revoked or the refresh token expired: a person must connect again."""

    kind = Problem.NEEDS_RECONNECT


class ProviderBusy(ProviderError):
    """The provider asked us to wait (429, 503): try again after `retry_after` seconds."""

    kind = Problem.PROVIDER_UNAVAILABLE

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class FolderRefused(ProviderError):
    """This server may not read the connection's folder (a local folder outside
    PAPERLANE_LOCAL_FOLDER_ROOTS, or one of Paperlane's own): nothing in it is read."""

    kind = Problem.FOLDER_REFUSED
