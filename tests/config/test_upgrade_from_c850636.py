"""A PostgreSQL database made by the code before PostgreSQL became the only engine
(c850636: SQLite supported, re-embeds as RQ jobs) migrates to today's code with nothing
lost, and today's code works on it: its schema is the one today's migrations make from
nothing, its rows are all there, search finds its settled documents. The database is
tests/fixtures/layout/main_c850636.sql, made by that commit's code (make_main_c850636.py
beside it says how)."""

import subprocess

import pytest
from django.db import connection

from tests.support.databases import (
    database_create,
    database_manage,
    database_rows,
    database_url,
    databases_drop,
)
from tests.support.processes import ROOT

pytestmark = pytest.mark.slow

DUMP = ROOT / "tests" / "fixtures" / "layout" / "main_c850636.sql"
TABLES = """
SELECT table_name FROM information_schema.tables
WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name
"""


def _counts(name: str) -> dict[str, int]:
    tables = [table for (table,) in database_rows(name, TABLES)]
    return {table: database_rows(name, f'SELECT count(*) FROM "{table}"')[0][0] for table in tables}


def _schema(name: str) -> list[str]:
    return _dump(name, "--schema-only").splitlines()[1:]  # past pg_dump's random key


def _dump(name: str, *options: str) -> str:
    dumped = subprocess.run(
        ["pg_dump", *options, "--no-owner", "--no-privileges", database_url(name)],
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
acme = Organisation.objects.get(slug="acme")
hits = documents_search(organisation=acme, query="tide").hits
# The vocabulary of the documents searchable before the upgrade: "Did you mean".
typo = documents_search(organisation=acme, query="extarction").suggestion
print(json.dumps([[hit.filename for hit in hits], typo]))
"""


def test_a_database_from_c850636_migrates_with_nothing_lost_and_is_searched(tmp_path):
    base = connection.settings_dict["NAME"]
    old = database_create(f"{base}_c850636", DUMP)
    fresh = database_create(f"{base}_fresh")
    reloaded = f"{base}_reloaded"
    old_reloaded = f"{base}_c850636_reloaded"
    try:
        before = _counts(old)
        assert before["jobs_importrun"] == 10 and before["documents_chunk"] > 0

        migrated = database_manage(old, "migrate", "--no-input")

        assert migrated.returncode == 0, migrated.stderr
        after = _counts(old)
        # Migrations made since the fixture add their own rows to django_migrations, and
        # new models their content types, permissions and (empty) tables.
        for table in ("django_migrations", "django_content_type", "auth_permission"):
            assert after.pop(table) >= before.pop(table)
        assert {table: rows for table, rows in after.items() if table in before} == before
        # The schema today's migrations make from nothing, column for column and index
        # for index (the migrations that kept their own SQL made the same), both through
        # a dump and a reload as the fixture was: PostgreSQL stores a reloaded condition
        # in an equivalent form of its own, and a condition a migration made since in its
        # first form until it is reloaded.
        assert database_manage(fresh, "migrate", "--no-input").returncode == 0
        for source, target in ((fresh, reloaded), (old, old_reloaded)):
            dump = tmp_path / f"{source}.sql"
            dump.write_text(_dump(source))
            database_create(target, dump)
        assert _schema(old_reloaded) == _schema(reloaded)
        searched = database_manage(old, code=SEARCH)
        assert searched.returncode == 0, searched.stderr
        assert searched.stdout.strip().splitlines()[-1] == '[["tides.pdf"], "extraction"]'
    finally:
        databases_drop(old, fresh, reloaded, old_reloaded)
