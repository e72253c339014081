"""Databases of their own beside the test database, on its server, for the tests of
upgrades: made (from a dump, or empty), read, driven by `manage.py`, dropped."""

import os
import subprocess
import sys
from pathlib import Path

import psycopg
from django.db import connection

from tests.support.processes import ROOT


def database_url(name: str) -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{name}"


def database_create(name: str, dump: Path | None = None) -> str:
    """A new database `name` (an older one of that name goes), loaded from `dump`."""
    with psycopg.connect(database_url("postgres"), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    if dump is not None:
        loaded = subprocess.run(
            ["psql", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(dump), database_url(name)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert loaded.returncode == 0, loaded.stderr
    return name


def databases_drop(*names: str) -> None:
    with psycopg.connect(database_url("postgres"), autocommit=True) as admin:
        for name in names:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def database_rows(name: str, sql: str) -> list[tuple]:
    with psycopg.connect(database_url(name)) as db:
        return db.execute(sql).fetchall()


def database_manage(name: str, *args: str, code: str = "") -> subprocess.CompletedProcess:
    """`manage.py ARGS` (or Python `code`) on the test settings, against database `name`."""
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATABASE_URL=database_url(name),
        SECRET_KEY="test-secret",
    )
    command = [sys.executable, "manage.py", *args] if args else [sys.executable, "-c", code]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
