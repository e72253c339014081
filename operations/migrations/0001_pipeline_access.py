from django.db import migrations, models

CODENAME = "view_pipeline"
GROUP = "Operators"


def grant_to_operators(apps, schema_editor):
    """Give the permission to the Operators group of a database made before it existed
    (Django creates permissions only after every migration has run, so make it here)."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    content_type, _ = ContentType.objects.get_or_create(
        app_label="operations", model="pipelineaccess"
    )
    permission, _ = Permission.objects.get_or_create(
        content_type=content_type,
        codename=CODENAME,
        defaults={"name": "Can view the pipeline dashboard and metrics"},
    )
    for group in Group.objects.filter(name=GROUP):
        group.permissions.add(permission)


def revoke(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    Permission.objects.filter(content_type__app_label="operations", codename=CODENAME).delete()


class Migration(migrations.Migration):
    initial = True
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.CreateModel(
            name="PipelineAccess",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False)),
            ],
            options={
                "managed": False,
                "default_permissions": (),
                "permissions": [("view_pipeline", "Can view the pipeline dashboard and metrics")],
            },
        ),
        migrations.RunPython(grant_to_operators, revoke),
    ]
