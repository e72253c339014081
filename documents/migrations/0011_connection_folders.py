"""What the sync knows of the folders in each connection's folder (item id, parent id,
name), so that a later sync can tell a folder moved in, out or within: Microsoft Graph's
delta reports a moved or renamed folder alone, not what is under it."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0010_pending_upload"),
    ]

    operations = [
        migrations.CreateModel(
            name="ConnectionFolder",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("item_id", models.CharField(max_length=1024)),
                ("parent_id", models.CharField(blank=True, max_length=1024)),
                ("name", models.CharField(max_length=1024)),
                ("seen_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "connection",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="folders",
                        to="documents.connection",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["connection", "parent_id"], name="connection_folder_parent")
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("connection", "item_id"), name="connection_folder_unique"
                    )
                ],
            },
        ),
    ]
