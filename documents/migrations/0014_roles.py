"""Roles: viewer, member, admin (documents/roles.py), and tokens that carry one.

A token made before roles could do everything an organisation's token can; it keeps
the role of the person who made it where that person is a member of its organisation,
and otherwise (made by an operator or a command) becomes an admin's token, so that no
integration loses a right it used the day before the upgrade.
"""

from django.db import migrations, models

ROLES = [("viewer", "Viewer"), ("member", "Member"), ("admin", "Admin")]


def tokens_keep_their_rights(apps, schema_editor):
    ApiToken = apps.get_model("documents", "ApiToken")
    Membership = apps.get_model("documents", "Membership")
    for token in ApiToken.objects.only("id", "organisation_id", "created_by_id").iterator():
        role = (
            Membership.objects.filter(
                organisation_id=token.organisation_id, user_id=token.created_by_id
            )
            .values_list("role", flat=True)
            .first()
        )
        ApiToken.objects.filter(id=token.id).update(role=role or "admin")


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
