"""A PostgreSQL database made by the code before PostgreSQL became the only engine
(c850636: SQLite supported, re-embeds as RQ jobs) migrates to today's code with nothing
lost, and today's code works on it: its schema is the one today's migrations make from
nothing, its rows are all there, search finds its settled documents. The database is
tests/fixtures/layout/main_c850636.sql, made by that commit's code (make_main_c850636.py
beside it says how)."""

import os
import subprocess
import sys

import psycopg
import pytest
from django.db import connection

from tests.support.processes import ROOT

pytestmark = pytest.mark.slow

DUMP = ROOT / "tests" / "fixtures" / "layout" / "main_c850636.sql"
TABLES = """
SELECT table_name FROM information_schema.tables
WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name
"""


def _url(name: str) -> str:
    db = connection.settings_dict
    return f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{name}"


def _database(name: str, dump=None) -> str:
    with psycopg.connect(_url("postgres"), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
    if dump is not None:
        loaded = subprocess.run(
            ["psql", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(dump), _url(name)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert loaded.returncode == 0, loaded.stderr
    return name


def _drop(*names: str) -> None:
    with psycopg.connect(_url("postgres"), autocommit=True) as admin:
        for name in names:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _rows(name: str, sql: str) -> list[tuple]:
    with psycopg.connect(_url(name)) as db:
        return db.execute(sql).fetchall()


def _counts(name: str) -> dict[str, int]:
    tables = [table for (table,) in _rows(name, TABLES)]
    return {table: _rows(name, f'SELECT count(*) FROM "{table}"')[0][0] for table in tables}


def _manage(name: str, *args: str, code: str = "") -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="tests.settings",
        DATABASE_URL=_url(name),
        SECRET_KEY="test-secret",
    )
    command = [sys.executable, "manage.py", *args] if args else [sys.executable, "-c", code]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)


def _schema(name: str) -> list[str]:
    return _dump(name, "--schema-only").splitlines()[1:]  # past pg_dump's random key


def _dump(name: str, *options: str) -> str:
    dumped = subprocess.run(
        ["pg_dump", *options, "--no-owner", "--no-privileges", _url(name)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dumped.returncode == 0, dumped.stderr
    return "\n".join(line for line in dumped.stdout.splitlines() if "restrict" not in line)


SEARCH = """
import django, json
django.setup()
from documents.models import Organisation
from retrieval.search import documents_search
hits = documents_search(organisation=Organisation.objects.get(slug="acme"), query="tide").hits
print(json.dumps([hit.filename for hit in hits]))
"""


def test_a_database_from_c850636_migrates_with_nothing_lost_and_is_searched(tmp_path):
    base = connection.settings_dict["NAME"]
    old = _database(f"{base}_c850636", DUMP)
    fresh = _database(f"{base}_fresh")
    reloaded = f"{base}_reloaded"
    try:
        before = _counts(old)
        assert before["jobs_importrun"] == 10 and before["documents_chunk"] > 0

        migrated = _manage(old, "migrate", "--no-input")

        assert migrated.returncode == 0, migrated.stderr
        assert _counts(old) == before
        # The schema today's migrations make from nothing, column for column and index
        # for index (the migrations that kept their own SQL made the same), both through
        # a dump and a reload as the fixture was: PostgreSQL stores a reloaded condition
        # in an equivalent form of its own.
        assert _manage(fresh, "migrate", "--no-input").returncode == 0
        dump = tmp_path / "fresh.sql"
        dump.write_text(_dump(fresh))
        _database(reloaded, dump)
        assert _schema(old) == _schema(reloaded)
        searched = _manage(old, code=SEARCH)
        assert searched.returncode == 0, searched.stderr
        assert searched.stdout.strip().splitlines()[-1] == '["tides.pdf"]'
    finally:
        _drop(old, fresh, reloaded)
