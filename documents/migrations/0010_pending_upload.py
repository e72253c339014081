"""Pending direct uploads (POST /api/v1/uploads): one row per presigned PUT handed out,
until it is completed into a document or expires. A new table: nothing waits."""

import django.db.models.deletion
import uuid
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('documents', '0009_document_deleted_at'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='PendingUpload',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('reserved_document_id', models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                ('storage_key', models.CharField(max_length=512, unique=True)),
                ('filename', models.CharField(max_length=255)),
                ('kind', models.CharField(choices=[('pdf', 'PDF'), ('docx', 'Word (DOCX)')], max_length=8)),
                ('content_type', models.CharField(max_length=100)),
                ('size_bytes', models.BigIntegerField()),
                ('expires_at', models.DateTimeField()),
                ('complete_by', models.DateTimeField()),
                ('completed_at', models.DateTimeField(blank=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('api_token', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='documents.apitoken')),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('document', models.OneToOneField(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='pending_upload', to='documents.document')),
                ('organisation', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='pending_uploads', to='documents.organisation')),
            ],
            options={
                'indexes': [models.Index(fields=['organisation', 'complete_by'], name='pending_upload_org_expiry'), models.Index(fields=['complete_by'], name='pending_upload_expiry')],
                'constraints': [models.CheckConstraint(condition=models.Q(('size_bytes__gt', 0)), name='pending_upload_size_positive'), models.CheckConstraint(condition=models.Q(models.Q(('completed_at__isnull', True), ('document__isnull', True)), models.Q(('completed_at__isnull', False), ('document__isnull', False)), _connector='OR'), name='pending_upload_completed_with_document')],
            },
        ),
    ]
