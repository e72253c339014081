"""An import points at its run (the pipeline's runs no longer point at imports): the link
is copied over from each run's `connector_import`, which pipeline 0010 then drops."""

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def link_runs(apps, schema_editor):
    ConnectorImport = apps.get_model("connectors", "ConnectorImport")
    ImportRun = apps.get_model("pipeline", "ImportRun")
    alias = schema_editor.connection.alias
    run_of = ImportRun.objects.using(alias).filter(connector_import_id=OuterRef("pk"))
    ConnectorImport.objects.using(alias).update(run_id=Subquery(run_of.values("id")[:1]))


def unlink_runs(apps, schema_editor):
    ConnectorImport = apps.get_model("connectors", "ConnectorImport")
    ImportRun = apps.get_model("pipeline", "ImportRun")
    alias = schema_editor.connection.alias
    import_of = ConnectorImport.objects.using(alias).filter(run_id=OuterRef("pk"))
    ImportRun.objects.using(alias).update(connector_import_id=Subquery(import_of.values("id")[:1]))


class Migration(migrations.Migration):

    dependencies = [
        ("connectors", "0001_initial"),
        ("pipeline", "0009_connector_import_moved"),
    ]

    operations = [
        migrations.AddField(
            model_name="connectorimport",
            name="run",
            field=models.OneToOneField(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="connector_import",
                to="pipeline.importrun",
            ),
        ),
        migrations.RunPython(link_runs, unlink_runs),
    ]
