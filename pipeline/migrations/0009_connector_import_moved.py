"""A run's connector import is now a model of the `connectors` app (the same table). Its
link is about to move to the import's side (connectors 0002, then 0010 here): until
then it keeps no reverse accessor, so the two never clash. The pipeline's own models'
content types follow the app's new name."""

import django.db.models.deletion
from django.db import migrations, models

MODELS = ("importrun", "stageattempt", "runtransition")


def content_types_follow(apps, schema_editor):
    """Content types (and so permissions, the Operators group's among them, and the
    admin's log) of the app's models follow its new name, rather than being made again."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    alias = schema_editor.connection.alias
    for model in MODELS:
        if not ContentType.objects.using(alias).filter(app_label="pipeline", model=model).exists():
            ContentType.objects.using(alias).filter(app_label="jobs", model=model).update(
                app_label="pipeline"
            )


def content_types_back(apps, schema_editor):
    ContentType = apps.get_model("contenttypes", "ContentType")
    alias = schema_editor.connection.alias
    ContentType.objects.using(alias).filter(app_label="pipeline", model__in=MODELS).update(
        app_label="jobs"
    )


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
        migrations.RunPython(content_types_follow, content_types_back),
    ]
