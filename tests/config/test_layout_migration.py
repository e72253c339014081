"""A PostgreSQL database made before the re-layout (the pipeline's app was `jobs`, the
connected-folder models lived in `documents`) migrates to today's apps with nothing
lost: its rows, each connector run's link to its file, the content types and so the
Operators group's permissions. The database is tests/fixtures/layout/jobs_era.sql,
made by that commit's code (make_jobs_era.py beside it says how)."""

import pytest
from django.db import connection

from tests.support.databases import (
    database_create,
    database_manage,
    database_rows,
    databases_drop,
)
from tests.support.processes import ROOT

pytestmark = pytest.mark.slow

DUMP = ROOT / "tests" / "fixtures" / "layout" / "jobs_era.sql"
TABLES = [
    "documents_organisation",
    "documents_membership",
    "documents_apitoken",
    "documents_document",
    "documents_documenttext",
    "documents_chunk",
    "documents_quotareservation",
    "documents_usageentry",
    "documents_connection",
    "documents_connectorimport",
    "documents_connectionsync",
    "jobs_importrun",
    "jobs_stageattempt",
    "jobs_runtransition",
    "auth_user",
    "auth_group_permissions",
    "django_admin_log",
]


CONTENT_TYPES = "SELECT app_label || '.' || model, id FROM django_content_type"
OPERATORS_PERMISSIONS = (
    "SELECT p.id FROM auth_group_permissions gp JOIN auth_permission p"
    " ON p.id = gp.permission_id JOIN auth_group g ON g.id = gp.group_id"
    " WHERE g.name = 'Operators' ORDER BY p.id"
)


@pytest.fixture
def old_database():
    name = database_create(f"{connection.settings_dict['NAME']}_jobs_era", DUMP)
    yield name
    databases_drop(name)


def _counts(name: str) -> dict[str, int]:
    return {table: database_rows(name, f"SELECT count(*) FROM {table}")[0][0] for table in TABLES}


GAINED = ["operations.view_pipeline", "axes.view_accessattempt", "axes.delete_accessattempt"]


def test_a_database_from_before_the_relayout_migrates_with_nothing_lost(old_database):
    before = _counts(old_database)
    links = database_rows(
        old_database,
        "SELECT id, connector_import_id FROM jobs_importrun WHERE connector_import_id IS NOT NULL",
    )
    content_types = dict(database_rows(old_database, CONTENT_TYPES))
    operators = database_rows(old_database, OPERATORS_PERMISSIONS)
    assert before["jobs_importrun"] == 10 and len(links) == 3 and before["documents_chunk"] > 0

    migrated = database_manage(old_database, "migrate", "--no-input")

    assert migrated.returncode == 0, migrated.stderr
    # The renamed app's migrations are the jobs ones, already applied: only the moves run.
    assert "Applying pipeline.0001" not in migrated.stdout
    assert "Applying connectors.0001_initial... OK" in migrated.stdout
    # Nothing lost; the Operators group gains what later releases ask of operators
    # (operations' first migration: the dashboard, and lifting sign-in locks).
    assert _counts(old_database) == {
        **before,
        "auth_group_permissions": before["auth_group_permissions"] + len(GAINED),
    }
    # Each connector run's file now points at its run, the same pairs as before.
    moved = database_rows(
        old_database,
        "SELECT run_id, id FROM documents_connectorimport WHERE run_id IS NOT NULL",
    )
    assert sorted(moved) == sorted(links)
    # The same content types under the apps' new names: permissions and the admin's log
    # follow, nothing is made anew.
    after = dict(
        database_rows(old_database, "SELECT app_label || '.' || model, id FROM django_content_type")
    )
    for model in ("importrun", "stageattempt", "runtransition"):
        assert after[f"pipeline.{model}"] == content_types[f"jobs.{model}"]
    for model in ("connection", "connectorimport", "connectionsync", "connectionfolder"):
        assert after[f"connectors.{model}"] == content_types[f"documents.{model}"]
    assert not [label for label in after if label.startswith("jobs.")]
    now = database_rows(old_database, OPERATORS_PERMISSIONS)
    assert operators and set(operators) <= set(now)
    gained = database_rows(
        old_database,
        "SELECT ct.app_label || '.' || p.codename FROM auth_permission p"
        " JOIN django_content_type ct ON ct.id = p.content_type_id"
        f" WHERE p.id IN ({', '.join(str(row[0]) for row in set(now) - set(operators))})",
    )
    assert sorted(row[0] for row in gained) == sorted(GAINED)
    # And the code reads it: runs with their files, through the new link.
    probe = database_manage(
        old_database,
        code=(
            "import django; django.setup()\n"
            "from pipeline.models import ImportRun\n"
            "runs = ImportRun.objects.filter(connector_import__isnull=False)\n"
            "runs = runs.select_related('connector_import')\n"
            "print(sorted(r.connector_import.name for r in runs))\n"
            "print(ImportRun.objects.filter(status='queued').count())\n"
        ),
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split("\n")[:2] == ["['scan-0.pdf', 'scan-1.pdf', 'scan-2.pdf']", "1"]
    assert database_manage(old_database, "migrate", "--check").returncode == 0
