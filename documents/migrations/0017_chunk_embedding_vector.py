"""The chunks' embeddings in a pgvector column (retrieval/vector_index.py), where the
server offers the `vector` extension: the extension is created if the role may, and the
column added. Without pgvector nothing changes and search scans the embeddings' bytes up
to a bound. The model does not know the column: it is written and read in SQL only.
Chunks written before it get theirs from `manage.py chunk_vectors`. The SQL is written
here as it was when this migration was made."""

import logging

from django.db import migrations, transaction

logger = logging.getLogger(__name__)


def add(apps, schema_editor):
    conn = schema_editor.connection
    with conn.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        if cursor.fetchone() is None:
            return
        try:
            # A savepoint: a refusal (no privilege) must not end the migration's transaction.
            with transaction.atomic(using=conn.alias):
                cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except Exception as exc:  # the driver's refusal, whatever its class
            logger.warning("The vector extension could not be created: %s", exc)
            return
        cursor.execute("ALTER TABLE documents_chunk ADD COLUMN IF NOT EXISTS embedding_vector vector")


def drop(apps, schema_editor):
    # The extension stays for others' use.
    schema_editor.execute("ALTER TABLE documents_chunk DROP COLUMN IF EXISTS embedding_vector")


class Migration(migrations.Migration):

    dependencies = [
        ("documents", "0016_chunk_pages"),
    ]

    operations = [migrations.RunPython(add, drop)]
