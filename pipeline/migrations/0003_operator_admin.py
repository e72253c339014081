import django.utils.timezone
from django.db import migrations, models
from django.db.models import F, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce


def stage_entered_from_history(apps, schema_editor):
    """Each run entered its current stage (or status) at its last transition that changed
    one of them; runs without such a transition, when they were created."""
    ImportRun = apps.get_model("pipeline", "ImportRun")
    RunTransition = apps.get_model("pipeline", "RunTransition")
    last_change = (
        RunTransition.objects.filter(run=OuterRef("pk"))
        .filter(~Q(from_status=F("to_status")) | ~Q(from_stage=F("to_stage")))
        .order_by("-created_at", "-id")
        .values("created_at")[:1]
    )
    ImportRun.objects.update(stage_entered_at=Coalesce(Subquery(last_change), F("created_at")))


# Searching error texts and document names for a word: trigram indexes. Django's
# icontains compares UPPER(column::text), so the indexes are on that expression. pg_trgm
# is a trusted extension (PostgreSQL 13+): the database's owner may create it. A server
# built without the contrib extensions has none: there the admin's word search scans.
TRIGRAM_INDEXES = {
    "run_error_trgm": "jobs_importrun USING gin (UPPER(error_message::text) gin_trgm_ops) "
    "WHERE error_message <> ''",
    "attempt_error_trgm": "jobs_stageattempt USING gin (UPPER(error_message::text) gin_trgm_ops) "
    "WHERE error_message <> ''",
    "document_filename_trgm": "documents_document USING gin (UPPER(filename::text) gin_trgm_ops)",
}


def trigram_indexes(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm'")
        if cursor.fetchone() is None:
            return
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    for name, definition in TRIGRAM_INDEXES.items():
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {name} ON {definition}")


def drop_trigram_indexes(apps, schema_editor):
    for name in TRIGRAM_INDEXES:
        schema_editor.execute(f"DROP INDEX IF EXISTS {name}")


class Migration(migrations.Migration):
    # Databases made before the app was renamed from `jobs` recorded it under that name.
    replaces = [("jobs", "0003_operator_admin")]
    dependencies = [("pipeline", "0002_attempt_counts"), ("documents", "0001_initial")]

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
        migrations.AddIndex(
            model_name="importrun",
            index=models.Index(fields=["created_at", "id"], name="run_recent"),
        ),
        migrations.AddIndex(
            model_name="importrun",
            index=models.Index(fields=["status", "created_at", "id"], name="run_status_recent"),
        ),
        migrations.AddIndex(
            model_name="importrun",
            index=models.Index(fields=["stage", "created_at", "id"], name="run_stage_recent"),
        ),
        migrations.AddIndex(
            model_name="importrun",
            index=models.Index(fields=["error_code", "created_at", "id"], name="run_error_recent"),
        ),
        migrations.AddIndex(
            model_name="importrun",
            index=models.Index(fields=["stage_entered_at"], name="run_stage_entered"),
        ),
        migrations.AddIndex(
            model_name="stageattempt",
            index=models.Index(fields=["started_at", "id"], name="attempt_recent"),
        ),
        migrations.AddIndex(
            model_name="stageattempt",
            index=models.Index(
                fields=["outcome", "started_at", "id"], name="attempt_outcome_recent"
            ),
        ),
        migrations.AddIndex(
            model_name="stageattempt",
            index=models.Index(
                fields=["error_type", "started_at", "id"], name="attempt_error_recent"
            ),
        ),
        migrations.RunPython(trigram_indexes, drop_trigram_indexes),
    ]
