"""For migrations that drop an index another index already serves (one starting with
the same column): each such index is paid for on every insert and update of its table.

`drop_indexes` is a RunPython operation: DROP INDEX IF EXISTS, concurrently on
PostgreSQL so that nothing waits while they go (the migration must be `atomic =
False`); reversed, it builds them again, concurrently too. The model's own state
(the foreign key's `db_index=False`) goes beside it in a SeparateDatabaseAndState.
"""

from django.db import migrations

# (index, table, column), as Django named the index.
Index = tuple[str, str, str]


def _concurrently(schema_editor) -> str:
    return " CONCURRENTLY" if schema_editor.connection.vendor == "postgresql" else ""


def drop_indexes(indexes: list[Index]) -> migrations.RunPython:
    def drop(apps, schema_editor):
        for name, _, _ in indexes:
            schema_editor.execute(f'DROP INDEX{_concurrently(schema_editor)} IF EXISTS "{name}"')

    def create(apps, schema_editor):
        for name, table, column in indexes:
            schema_editor.execute(
                f'CREATE INDEX{_concurrently(schema_editor)} IF NOT EXISTS "{name}" '
                f'ON "{table}" ("{column}")'
            )

    return migrations.RunPython(drop, create)
