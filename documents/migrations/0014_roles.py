"""Roles: viewer, member, admin (documents/roles.py), and tokens that carry one.

A token made before roles could do everything an organisation's token can: each
becomes an admin's token, so that no integration loses a right it used the day before
the upgrade (operators narrow them by making new tokens and revoking the old ones).
Memberships keep their role ("member" or "admin"; "viewer" is new).
"""

from django.db import migrations, models

ROLES = [("viewer", "Viewer"), ("member", "Member"), ("admin", "Admin")]


def tokens_keep_their_rights(apps, schema_editor):
    apps.get_model("documents", "ApiToken").objects.update(role="admin")


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0013_document_searchable_version"),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="role",
            field=models.CharField(choices=ROLES, default="member", max_length=16),
        ),
        migrations.AlterField(
            model_name="membership",
            name="role",
            field=models.CharField(choices=ROLES, default="member", max_length=16),
        ),
        migrations.RunPython(tokens_keep_their_rights, migrations.RunPython.noop, elidable=True),
    ]
