"""Search reads only the chunks of a document's settled version (`searchable_version`).

The backfill makes searchable what was settled before this field existed: the newest
version of each document that the usage ledger charged (a run of it settled), when
chunks of that version are stored. That is the current version of every document whose
latest run succeeded, and the previous one of a connected file whose newer version has
not settled (its chunks stay searchable until it does). Chunks of versions that never
settled (a run cancelled or failed half way) are left where they are, unsearchable; the
next run of the document that ends without success removes them.
"""

from django.db import migrations, models
from django.db.models import Count, Exists, OuterRef, Subquery
from django.db.models.functions import Coalesce


def searchable_from_the_ledger(apps, schema_editor):
    Document = apps.get_model("documents", "Document")
    UsageEntry = apps.get_model("documents", "UsageEntry")
    Chunk = apps.get_model("documents", "Chunk")
    charged = (
        UsageEntry.objects.filter(document_id=OuterRef("id"))
        .order_by("-document_version")
        .values("document_version")[:1]
    )
    Document.objects.filter(deleted_at__isnull=True).update(searchable_version=Subquery(charged))
    stored = Chunk.objects.filter(
        document_id=OuterRef("id"), version=OuterRef("searchable_version")
    )
    Document.objects.filter(searchable_version__isnull=False).exclude(Exists(stored)).update(
        searchable_version=None
    )
    # The chunk count is what search can find.
    Document.objects.filter(searchable_version__isnull=True).exclude(chunk_count=0).update(
        chunk_count=0
    )
    counted = (
        Chunk.objects.filter(document_id=OuterRef("id"), version=OuterRef("searchable_version"))
        .values("document_id")
        .annotate(n=Count("id"))
        .values("n")
    )
    Document.objects.filter(searchable_version__isnull=False).update(
        chunk_count=Coalesce(Subquery(counted), 0)
    )


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0012_connectors_moved"),
    ]

    operations = [
        migrations.AddField(
            model_name="document",
            name="searchable_version",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.RunPython(searchable_from_the_ledger, migrations.RunPython.noop),
    ]
