"""Indexes for admission control at accept (pipeline/services/admission.py): interactive runs
not yet ended, by when their stage became due and by organisation, and an organisation's
ended runs by when they ended (its drain rate).

Partial, so they hold only what admission reads (runs in flight are few; ended runs are
written once). Kept out of the models' state on purpose (plain SQL, no AddIndex), as in
0004: PostgreSQL builds them CONCURRENTLY so that migrating a busy database does not
block the workers.
"""

from django.db import migrations

IN_FLIGHT = "status IN ('queued', 'processing') AND priority = 'interactive'"

INDEXES = {
    "admit_run_waiting": f"jobs_importrun (due_at) WHERE {IN_FLIGHT}",
    "admit_run_org_in_flight": f"jobs_importrun (organisation_id) WHERE {IN_FLIGHT}",
    "admit_run_org_ended": (
        "jobs_importrun (organisation_id, finished_at) WHERE finished_at IS NOT NULL"
    ),
}


def create(apps, schema_editor):
    for name, definition in INDEXES.items():
        schema_editor.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {definition}")


def drop(apps, schema_editor):
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


class Migration(migrations.Migration):
    # Databases made before the app was renamed from `jobs` recorded it under that name.
    replaces = [("jobs", "0006_admission_indexes")]
    # CREATE INDEX CONCURRENTLY cannot run inside a transaction.
    atomic = False

    dependencies = [("pipeline", "0005_attempt_error_code")]

    operations = [migrations.RunPython(create, drop)]
