"""A run's connector import is now a model of the `connectors` app (the same table). Its
link is about to move to the import's side (connectors 0002, then 0010 here): until
then it keeps no reverse accessor, so the two never clash. The pipeline's own models'
content types (and so permissions, the Operators group's among them, and the admin's
log) follow the app's new name, rather than being made again."""

import django.db.models.deletion
from django.db import migrations, models

from core.migration_content_types import content_types_move


class Migration(migrations.Migration):

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("connectors", "0001_initial"),
        ("pipeline", "0008_drop_redundant_fk_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="importrun",
                    name="connector_import",
                    field=models.OneToOneField(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="connectors.connectorimport",
                    ),
                ),
            ],
        ),
        content_types_move(
            models=("importrun", "stageattempt", "runtransition"),
            old_label="jobs",
            new_label="pipeline",
        ),
    ]
