"""The chunks' embeddings in a pgvector column (documents/vectors_sql.py), on PostgreSQL
where the server offers the `vector` extension: the extension is created if the role may,
and the column added. Elsewhere (SQLite, PostgreSQL without pgvector) nothing changes and
search scans the embeddings' bytes. The model does not know the column: it is written and
read in SQL only. Chunks written before it get theirs from `manage.py chunk_vectors`."""

from django.db import migrations

from documents.vectors_sql import vector_column_add, vector_column_drop


def add(apps, schema_editor):
    vector_column_add(schema_connection=schema_editor.connection)


def drop(apps, schema_editor):
    vector_column_drop(schema_connection=schema_editor.connection)


class Migration(migrations.Migration):

    dependencies = [
        ("documents", "0016_chunk_pages"),
    ]

    operations = [migrations.RunPython(add, drop)]
