"""A connected file whose bytes a live document of the organisation has already is
recorded as a duplicate of that document, not imported or charged again."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("connectors", "0004_disconnect_and_history"),
        ("documents", "0018_search_index"),
        ("pipeline", "0011_attempt_stopped_and_lease_lost"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="connectorimport",
            name="import_state_valid",
        ),
        migrations.AddField(
            model_name="connectorimport",
            name="duplicate_of",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="documents.document",
            ),
        ),
        migrations.AlterField(
            model_name="connectorimport",
            name="state",
            field=models.CharField(
                choices=[
                    ("queued", "Importing"),
                    ("imported", "Imported"),
                    ("skipped", "Skipped"),
                    ("failed", "Failed"),
                    ("deleted", "Deleted at the source"),
                    ("duplicate", "Duplicate"),
                ],
                default="queued",
                max_length=16,
            ),
        ),
        migrations.AddConstraint(
            model_name="connectorimport",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    (
                        "state__in",
                        ["queued", "imported", "skipped", "failed", "deleted", "duplicate"],
                    )
                ),
                name="import_state_valid",
            ),
        ),
    ]
