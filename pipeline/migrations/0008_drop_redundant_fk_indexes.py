"""Drop three foreign-key indexes that an index starting with the same column already
serves. Every claim and completion updates or inserts these rows, so each index is paid
for on every stage. Only the indexes go (concurrently on PostgreSQL, so nothing waits);
the constraints stay as they are."""

import django.db.models.deletion
from django.db import migrations, models

from core.migration_indexes import drop_indexes

INDEXES = [
    ("jobs_importrun_organisation_id_26309abe", "jobs_importrun", "organisation_id"),
    ("jobs_runtransition_run_id_1aadff48", "jobs_runtransition", "run_id"),
    ("jobs_stageattempt_run_id_c75d5978", "jobs_stageattempt", "run_id"),
]


class Migration(migrations.Migration):
    # Databases made before the app was renamed from `jobs` recorded it under that name.
    replaces = [("jobs", "0008_drop_redundant_fk_indexes")]
    atomic = False

    dependencies = [
        ("documents", "0003_connections"),
        ("pipeline", "0007_connector_runs"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[drop_indexes(INDEXES)],
            state_operations=[
                migrations.AlterField(
                    model_name="importrun",
                    name="organisation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="runs",
                        to="documents.organisation",
                    ),
                ),
                migrations.AlterField(
                    model_name="runtransition",
                    name="run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="transitions",
                        to="pipeline.importrun",
                    ),
                ),
                migrations.AlterField(
                    model_name="stageattempt",
                    name="run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="attempts_log",
                        to="pipeline.importrun",
                    ),
                ),
            ],
        ),
    ]
