"""For migrations that move models to another app (or rename an app) with their tables.

`content_types_move` is a RunPython operation: the models' content types take the
new app label, so their permissions (and the groups holding them) and the admin's log
follow, instead of new, empty ones being made after the migration. A database made
since has none to move (content types are made after migrating), and a label already
taken is left alone. Its reverse moves them back.
"""

from django.db import migrations


def _move(models: tuple[str, ...], source: str, target: str):
    def move(apps, schema_editor):
        ContentType = apps.get_model("contenttypes", "ContentType")
        types = ContentType.objects.using(schema_editor.connection.alias)
        for model in models:
            if not types.filter(app_label=target, model=model).exists():
                types.filter(app_label=source, model=model).update(app_label=target)

    return move


def content_types_move(*, models: tuple[str, ...], old_label: str, new_label: str):
    """RunPython: the content types of `models` (lower-case names) from `old_label` to
    `new_label`, and back when unapplied."""
    return migrations.RunPython(
        _move(models, old_label, new_label), _move(models, new_label, old_label)
    )
