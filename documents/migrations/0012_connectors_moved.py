"""The connected-folder models now belong to the `connectors` app (its migration 0001):
they leave this app's state, and their tables stay as they are."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("documents", "0011_connection_folders"),
        ("connectors", "0001_initial"),
        ("pipeline", "0009_connector_import_moved"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name="ConnectionSync"),
                migrations.DeleteModel(name="ConnectionFolder"),
                migrations.DeleteModel(name="ConnectorImport"),
                migrations.DeleteModel(name="Connection"),
            ],
        ),
    ]
