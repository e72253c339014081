"""The connected-folder models move here from `documents`, their tables and rows with them:
only Django's idea of which app holds them changes. Databases made since are the same,
their tables made by documents' migrations 0003 and 0011 under the same names."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

from core.migration_content_types import content_types_move


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("documents", "0011_connection_folders"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Connection',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('provider', models.CharField(choices=[('onedrive', 'OneDrive'), ('local', 'Local folder')], max_length=16)),
                        ('folder_id', models.CharField(max_length=1024)),
                        ('folder_path', models.CharField(max_length=1024)),
                        ('credentials_encrypted', models.TextField(blank=True)),
                        ('provider_state', models.JSONField(blank=True, default=dict)),
                        ('cursor', models.TextField(blank=True)),
                        ('reconcile_since', models.DateTimeField(blank=True, null=True)),
                        ('status', models.CharField(choices=[('active', 'Active'), ('paused', 'Paused'), ('needs_reconnect', 'Needs reconnect'), ('error', 'Error')], default='active', max_length=20)),
                        ('status_reason', models.TextField(blank=True)),
                        ('last_sync_at', models.DateTimeField(blank=True, null=True)),
                        ('last_sync_result', models.CharField(blank=True, choices=[('ok', 'OK'), ('busy', 'Provider busy'), ('failed', 'Failed'), ('needs_reconnect', 'Needs reconnect')], max_length=20)),
                        ('last_error', models.TextField(blank=True)),
                        ('consecutive_failures', models.PositiveIntegerField(default=0)),
                        ('files_seen', models.PositiveIntegerField(default=0)),
                        ('files_imported', models.PositiveIntegerField(default=0)),
                        ('files_skipped', models.PositiveIntegerField(default=0)),
                        ('files_failed', models.PositiveIntegerField(default=0)),
                        ('next_sync_at', models.DateTimeField(blank=True, null=True)),
                        ('sync_requested_at', models.DateTimeField(blank=True, null=True)),
                        ('sync_owner', models.CharField(blank=True, max_length=200)),
                        ('sync_lease_until', models.DateTimeField(blank=True, null=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('organisation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='connections', to='documents.organisation')),
                    ],
                    options={
                        'db_table': 'documents_connection',
                    },
                ),
                migrations.CreateModel(
                    name='ConnectionFolder',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('item_id', models.CharField(max_length=1024)),
                        ('parent_id', models.CharField(blank=True, max_length=1024)),
                        ('name', models.CharField(max_length=1024)),
                        ('seen_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('connection', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='folders', to='connectors.connection')),
                    ],
                    options={
                        'db_table': 'documents_connectionfolder',
                    },
                ),
                migrations.CreateModel(
                    name='ConnectionSync',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('started_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('result', models.CharField(blank=True, max_length=20)),
                        ('files_seen', models.PositiveIntegerField(default=0)),
                        ('imports_started', models.PositiveIntegerField(default=0)),
                        ('files_skipped', models.PositiveIntegerField(default=0)),
                        ('files_deleted', models.PositiveIntegerField(default=0)),
                        ('error', models.TextField(blank=True)),
                        ('connection', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='syncs', to='connectors.connection')),
                    ],
                    options={
                        'db_table': 'documents_connectionsync',
                        'ordering': ['-started_at', '-id'],
                    },
                ),
                migrations.CreateModel(
                    name='ConnectorImport',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('file_id', models.CharField(max_length=1024)),
                        ('content_version', models.CharField(max_length=255)),
                        ('name', models.CharField(max_length=255)),
                        ('path', models.CharField(max_length=2048)),
                        ('size_bytes', models.BigIntegerField(blank=True, null=True)),
                        ('document_version', models.PositiveIntegerField(blank=True, null=True)),
                        ('state', models.CharField(choices=[('queued', 'Importing'), ('imported', 'Imported'), ('skipped', 'Skipped'), ('failed', 'Failed'), ('deleted', 'Deleted at the source')], default='queued', max_length=16)),
                        ('reason', models.TextField(blank=True)),
                        ('seen_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('connection', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='imports', to='connectors.connection')),
                        ('document', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='connector_imports', to='documents.document')),
                        ('organisation', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='connector_imports', to='documents.organisation')),
                    ],
                    options={
                        'db_table': 'documents_connectorimport',
                    },
                ),
                migrations.AddIndex(
                    model_name='connection',
                    index=models.Index(fields=['status', 'next_sync_at'], name='connection_due'),
                ),
                migrations.AddConstraint(
                    model_name='connection',
                    constraint=models.CheckConstraint(condition=models.Q(('provider__in', ['onedrive', 'local'])), name='connection_provider_valid'),
                ),
                migrations.AddConstraint(
                    model_name='connection',
                    constraint=models.CheckConstraint(condition=models.Q(('status__in', ['active', 'paused', 'needs_reconnect', 'error'])), name='connection_status_valid'),
                ),
                migrations.AddIndex(
                    model_name='connectionfolder',
                    index=models.Index(fields=['connection', 'parent_id'], name='connection_folder_parent'),
                ),
                migrations.AddConstraint(
                    model_name='connectionfolder',
                    constraint=models.UniqueConstraint(fields=('connection', 'item_id'), name='connection_folder_unique'),
                ),
                migrations.AddIndex(
                    model_name='connectionsync',
                    index=models.Index(fields=['connection', '-started_at'], name='sync_recent'),
                ),
                migrations.AddIndex(
                    model_name='connectorimport',
                    index=models.Index(fields=['connection', 'file_id'], name='import_connection_file'),
                ),
                migrations.AddIndex(
                    model_name='connectorimport',
                    index=models.Index(fields=['connection', 'state', '-created_at'], name='import_state'),
                ),
                migrations.AddConstraint(
                    model_name='connectorimport',
                    constraint=models.UniqueConstraint(fields=('organisation', 'connection', 'file_id', 'content_version'), name='import_key_unique'),
                ),
                migrations.AddConstraint(
                    model_name='connectorimport',
                    constraint=models.CheckConstraint(condition=models.Q(('state__in', ['queued', 'imported', 'skipped', 'failed', 'deleted'])), name='import_state_valid'),
                ),
            ],
        ),
        # Their content types (and so permissions, the Operators group's among them, and
        # the admin's log) follow them, rather than being made again empty.
        content_types_move(
            models=("connection", "connectorimport", "connectionsync", "connectionfolder"),
            old_label="documents",
            new_label="connectors",
        ),
    ]
