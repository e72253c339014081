import django.utils.timezone
from django.db import migrations, models
from django.db.models import F, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce


def stage_entered_from_history(apps, schema_editor):
    """Each run entered its current stage (or status) at its last transition that changed
    one of them; runs without such a transition, when they were created."""
    ImportRun = apps.get_model("jobs", "ImportRun")
    RunTransition = apps.get_model("jobs", "RunTransition")
    last_change = (
        RunTransition.objects.filter(run=OuterRef("pk"))
        .filter(~Q(from_status=F("to_status")) | ~Q(from_stage=F("to_stage")))
        .order_by("-created_at", "-id")
        .values("created_at")[:1]
    )
    ImportRun.objects.update(stage_entered_at=Coalesce(Subquery(last_change), F("created_at")))


class Migration(migrations.Migration):
    dependencies = [("jobs", "0002_attempt_counts")]

    operations = [
        migrations.AddField(
            model_name="importrun",
            name="stage_entered_at",
            field=models.DateTimeField(null=True),
        ),
        migrations.RunPython(stage_entered_from_history, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="importrun",
            name="stage_entered_at",
            field=models.DateTimeField(default=django.utils.timezone.now),
        ),
    ]
