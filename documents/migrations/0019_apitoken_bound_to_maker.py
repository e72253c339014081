"""Tokens made by an organisation's admins on the members' tokens page act for their
maker (ApiToken.bound_to_maker): never with more than the role the maker has now.

Those made before are told from the ones operators made in the admin by the admin's
log, which has recorded the addition of every token made there since tokens had a
maker: a token with a maker and no such record was made on the members' page. Tokens
without a maker (create_api_token, or whose maker's account is gone) stay the
organisation's."""

from django.db import migrations, models

ADDITION = 1  # django.contrib.admin.models.ADDITION


def page_tokens_act_for_their_maker(apps, schema_editor):
    ApiToken = apps.get_model("documents", "ApiToken")
    LogEntry = apps.get_model("admin", "LogEntry")
    ContentType = apps.get_model("contenttypes", "ContentType")
    kind = ContentType.objects.filter(app_label="documents", model="apitoken").first()
    made_in_admin = set()
    if kind is not None:
        made_in_admin = set(
            LogEntry.objects.filter(content_type=kind, action_flag=ADDITION).values_list(
                "object_id", flat=True
            )
        )
    page_made = [
        token_id
        for token_id in ApiToken.objects.filter(created_by__isnull=False).values_list(
            "id", flat=True
        )
        if str(token_id) not in made_in_admin
    ]
    ApiToken.objects.filter(id__in=page_made).update(bound_to_maker=True)


class Migration(migrations.Migration):
    dependencies = [
        ("documents", "0018_search_index"),
        ("admin", "0003_logentry_add_action_flag_choices"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="bound_to_maker",
            field=models.BooleanField(default=False, verbose_name="acts for its maker"),
        ),
        migrations.RunPython(
            page_tokens_act_for_their_maker, migrations.RunPython.noop, elidable=True
        ),
    ]
