"""Indexes for the operators' reads (operations/stats): attempts by when they finished, and
ended runs by status and when they ended.

Kept out of the models' state on purpose (plain SQL, no AddIndex): they serve
read queries only, and PostgreSQL builds them CONCURRENTLY so that migrating a
busy database does not block the workers writing attempts.
"""

from django.db import migrations

INDEXES = {
    "stats_attempt_finished": "jobs_stageattempt (finished_at) WHERE finished_at IS NOT NULL",
    "stats_run_ended": "jobs_importrun (status, finished_at) WHERE finished_at IS NOT NULL",
}


def create(apps, schema_editor):
    for name, definition in INDEXES.items():
        schema_editor.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {definition}")


def drop(apps, schema_editor):
    for name in INDEXES:
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


class Migration(migrations.Migration):
    # Databases made before the app was renamed from `jobs` recorded it under that name.
    replaces = [("jobs", "0004_stats_indexes")]
    # CREATE INDEX CONCURRENTLY cannot run inside a transaction.
    atomic = False

    dependencies = [("pipeline", "0003_operator_admin")]

    operations = [migrations.RunPython(create, drop)]
