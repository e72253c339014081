from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0007_document_sha256_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="document",
            name="unreadable_pages",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
