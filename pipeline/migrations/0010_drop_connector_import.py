"""A run's connector import is found from the import now (connectors 0002 copied the link)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("pipeline", "0009_connector_import_moved"),
        ("connectors", "0002_import_run"),
    ]

    operations = [
        migrations.RemoveField(model_name="importrun", name="connector_import"),
    ]
