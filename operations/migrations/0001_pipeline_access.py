from django.db import migrations, models

CODENAME = "view_pipeline"
GROUP = "Operators"
# (app, model, codename, name): the dashboard and /metrics; and the sign-in locks
# (django-axes' access attempts), which operators read and lift.
GRANTED = [
    ("operations", "pipelineaccess", CODENAME, "Can view the pipeline dashboard and metrics"),
    ("axes", "accessattempt", "view_accessattempt", "Can view access attempt"),
    ("axes", "accessattempt", "delete_accessattempt", "Can delete access attempt"),
]


def grant_to_operators(apps, schema_editor):
    """Give the permissions to the Operators group of a database made before they existed
    (Django creates permissions only after every migration has run, so make them here;
    a new group gets them from `operators_group()`)."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    permissions = []
    for app_label, model, codename, name in GRANTED:
        content_type, _ = ContentType.objects.get_or_create(app_label=app_label, model=model)
        permission, _ = Permission.objects.get_or_create(
            content_type=content_type, codename=codename, defaults={"name": name}
        )
        permissions.append(permission)
    for group in Group.objects.filter(name=GROUP):
        group.permissions.add(*permissions)


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
