"""A folder provider whose listings a test writes: pages, deletions, restarts, a busy or
revoked provider, and file bytes. It stands for the remote service (as a local HTTP
server does for Graph); the sync, stages and database under test are the real ones.

Tests point connectors.registry.PROVIDERS["onedrive"] at `ScriptedProvider` and set
`ScriptedProvider.script`: a list of listings, each a list of ChangePages (or an
exception to raise), served one listing per sync.
"""

import io
from typing import BinaryIO

from connectors.base import ChangePage


class ScriptedProvider:
    name = "scripted"
    # One entry per sync: a list of ChangePage, or an exception raised when listing.
    script: list = []
    # file id -> bytes, what open() returns; or a function called as the download starts
    # that returns them (a test makes something happen meanwhile).
    files: dict = {}
    cursors_given: list = []
    # Raised by maintain() when set (e.g. NeedsReconnect: a refresh token refused).
    maintain_error: Exception | None = None

    def changes(self, connection, cursor):
        type(self).cursors_given.append(cursor)
        listing = type(self).script.pop(0)
        if isinstance(listing, Exception):
            raise listing
        for page in listing:
            if isinstance(page, Exception):
                raise page
            yield page

    def open(self, connection, file_id: str) -> BinaryIO:
        try:
            data = type(self).files[file_id]
        except KeyError:
            raise FileNotFoundError(file_id) from None
        return io.BytesIO(data() if callable(data) else data)

    def maintain(self, connection) -> None:
        if type(self).maintain_error is not None:
            raise type(self).maintain_error

    def disconnect(self, connection, *, credentials: dict, state: dict) -> str:
        return ""


def page(*files, cursor=None, restarted=False) -> ChangePage:
    return ChangePage(files=list(files), cursor=cursor, restarted=restarted)
