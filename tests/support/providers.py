"""A folder provider whose listings a test writes: pages, deletions, restarts, a busy or
revoked provider, and file bytes. It stands for the remote service (as a local HTTP
server does for Graph); the sync, stages and database under test are the real ones.

Tests point PAPERLANE_CONNECTOR_PROVIDERS["onedrive"] at `ScriptedProvider` and set
`ScriptedProvider.script`: a list of listings, each a list of ChangePages (or an
exception to raise), served one listing per sync.
"""

import io
from typing import BinaryIO

from jobs.connectors.base import ChangePage


class ScriptedProvider:
    name = "scripted"
    # One entry per sync: a list of ChangePage, or an exception raised when listing.
    script: list = []
    # file id -> bytes, what open() returns.
    files: dict[str, bytes] = {}
    cursors_given: list = []

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
            return io.BytesIO(type(self).files[file_id])
        except KeyError:
            raise FileNotFoundError(file_id) from None

    def maintain(self, connection) -> None:
        pass


def page(*files, cursor=None, restarted=False) -> ChangePage:
    return ChangePage(files=list(files), cursor=cursor, restarted=restarted)
