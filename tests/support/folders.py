"""A local folder for connector tests: files written into it, and a fingerprint of every
file (bytes and times) to prove the connector left them as they were."""

import hashlib
import os
from pathlib import Path

import pytest

from connectors.models import Connection
from connectors.services import connection_create_local
from connectors.sync import SyncOutcome, connection_sync


def write(folder: Path, relative: str, data: bytes) -> Path:
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def fingerprint(folder: Path) -> dict[str, tuple[str, int, int]]:
    """{relative path: (sha256, size, mtime_ns)} of every file below `folder`."""
    prints = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            info = path.stat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            prints[str(path.relative_to(folder))] = (digest, info.st_size, info.st_mtime_ns)
    return prints


def age(path: Path, seconds: float) -> None:
    """Set a file's times `seconds` into the past, as if it was written that long ago."""
    info = path.stat()
    past = info.st_mtime_ns - int(seconds * 1e9)
    os.utime(path, ns=(past, past))


def sync(connection: Connection) -> SyncOutcome:
    outcome = connection_sync(connection=connection)
    assert outcome is not None, "the sync was held elsewhere"
    connection.refresh_from_db()
    return outcome


def local_folder_fixtures(name: str):
    """The fixtures a local-connector test module binds at its top level:
    `_fast_settle, folder, connection = local_folder_fixtures("scans")`.

    `_fast_settle` (autouse) lists a file once two polls in a row see it unchanged,
    `folder` is an empty folder `name` under tmp_path, and `connection` is the `org`
    fixture's local connection to it."""

    @pytest.fixture(autouse=True)
    def _fast_settle(monkeypatch):
        # Two polls in a row see a file unchanged: enough to list it in these tests.
        monkeypatch.setattr("connectors.local.STABLE_SECONDS", 0)

    @pytest.fixture
    def folder(tmp_path):
        path = tmp_path / name
        path.mkdir()
        return path

    @pytest.fixture
    def connection(org, folder):
        return connection_create_local(organisation=org, path=str(folder))

    return _fast_settle, folder, connection
