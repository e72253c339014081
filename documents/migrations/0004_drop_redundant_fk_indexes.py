"""Drop nine foreign-key indexes that an index starting with the same column already
serves (documents by organisation, chunks and texts by document, among others). Every
upload inserts a document and a reservation, every extraction a text, every embedding
hundreds of chunks: each index is paid for on every row. Only the indexes go
(concurrently on PostgreSQL, so nothing waits); the constraints stay as they are."""

import django.db.models.deletion
from django.db import migrations, models

from core.migration_indexes import drop_indexes

INDEXES = [
    ("documents_chunk_document_id_3b191792", "documents_chunk", "document_id"),
    (
        "documents_connectionsync_connection_id_9b567876",
        "documents_connectionsync",
        "connection_id",
    ),
    (
        "documents_connectorimport_connection_id_c985f445",
        "documents_connectorimport",
        "connection_id",
    ),
    (
        "documents_connectorimport_organisation_id_edfadc1f",
        "documents_connectorimport",
        "organisation_id",
    ),
    ("documents_document_organisation_id_09c4747c", "documents_document", "organisation_id"),
    ("documents_documenttext_document_id_a57bd23d", "documents_documenttext", "document_id"),
    ("documents_membership_organisation_id_d71fb30c", "documents_membership", "organisation_id"),
    (
        "documents_quotareservation_organisation_id_c61853d7",
        "documents_quotareservation",
        "organisation_id",
    ),
    ("documents_usageentry_organisation_id_82bc1d51", "documents_usageentry", "organisation_id"),
]


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("documents", "0003_connections"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[drop_indexes(INDEXES)],
            state_operations=[
                migrations.AlterField(
                    model_name="chunk",
                    name="document",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="chunks",
                        to="documents.document",
                    ),
                ),
                migrations.AlterField(
                    model_name="connectionsync",
                    name="connection",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="syncs",
                        to="documents.connection",
                    ),
                ),
                migrations.AlterField(
                    model_name="connectorimport",
                    name="connection",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="imports",
                        to="documents.connection",
                    ),
                ),
                migrations.AlterField(
                    model_name="connectorimport",
                    name="organisation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="connector_imports",
                        to="documents.organisation",
                    ),
                ),
                migrations.AlterField(
                    model_name="document",
                    name="organisation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="documents",
                        to="documents.organisation",
                    ),
                ),
                migrations.AlterField(
                    model_name="documenttext",
                    name="document",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="texts",
                        to="documents.document",
                    ),
                ),
                migrations.AlterField(
                    model_name="membership",
                    name="organisation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="memberships",
                        to="documents.organisation",
                    ),
                ),
                migrations.AlterField(
                    model_name="quotareservation",
                    name="organisation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="reservations",
                        to="documents.organisation",
                    ),
                ),
                migrations.AlterField(
                    model_name="usageentry",
                    name="organisation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="usage",
                        to="documents.organisation",
                    ),
                ),
            ],
        ),
    ]
