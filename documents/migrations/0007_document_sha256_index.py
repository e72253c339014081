"""An index on documents' SHA-256, so that the admin's search for a whole hash (a file
an operator was sent, across organisations) reads one entry instead of the table. Built
concurrently on PostgreSQL, so uploads go on meanwhile."""

from django.db import migrations, models

from core.migration_indexes import create_indexes


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("documents", "0006_chunk_text_search"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                create_indexes([("document_sha256", "documents_document", "sha256")])
            ],
            state_operations=[
                migrations.AddIndex(
                    model_name="document",
                    index=models.Index(fields=["sha256"], name="document_sha256"),
                ),
            ],
        ),
    ]
