from django.db import migrations, models
from django.db.models import Count, OuterRef, Subquery


def count_attempts(apps, schema_editor):
    ImportRun = apps.get_model("pipeline", "ImportRun")
    StageAttempt = apps.get_model("pipeline", "StageAttempt")
    per_run = (
        StageAttempt.objects.filter(run=OuterRef("pk"))
        .values("run")
        .annotate(n=Count("id"))
        .values("n")
    )
    ImportRun.objects.update(total_attempts=Subquery(per_run))
    ImportRun.objects.filter(total_attempts__isnull=True).update(total_attempts=0)


class Migration(migrations.Migration):
    # Databases made before the app was renamed from `jobs` recorded it under that name.
    replaces = [("jobs", "0002_attempt_counts")]
    dependencies = [("pipeline", "0001_initial")]

    operations = [
        migrations.RenameField("importrun", "attempts", "stage_attempts"),
        migrations.AddField(
            model_name="importrun",
            name="total_attempts",
            field=models.PositiveIntegerField(default=0, null=True),
        ),
        migrations.RunPython(count_attempts, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="importrun",
            name="total_attempts",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="stageattempt",
            name="error_type",
            field=models.CharField(blank=True, max_length=200),
        ),
    ]
