"""For migrations that add or drop plain indexes on tables that may be large.

`drop_indexes` (for an index another one already serves, one starting with the same
column: each is paid for on every insert and update of its table) and `create_indexes`
are RunPython operations, reverses of each other: DROP INDEX IF EXISTS and CREATE INDEX
IF NOT EXISTS, concurrently so that nothing waits meanwhile (the migration must be
`atomic = False`). The model's own state (the foreign key's `db_index=False`,
the Meta index) goes beside it in a SeparateDatabaseAndState.
"""

from django.db import migrations

# (index, table, column), as Django named the index.
Index = tuple[str, str, str]


def create_indexes(indexes: list[Index]) -> migrations.RunPython:
    drop = drop_indexes(indexes)
    return migrations.RunPython(drop.reverse_code, drop.code)


def drop_invalid_index(schema_editor, name: str) -> None:
    """Drop `name` if an earlier concurrent build of it failed half way (PostgreSQL keeps
    such an index, INVALID: never used, still written), so that CREATE INDEX ... IF NOT
    EXISTS builds it again instead of passing over it."""
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = %s AND NOT i.indisvalid",
            [name],
        )
        invalid = cursor.fetchone() is not None
    if invalid:
        schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')


def drop_indexes(indexes: list[Index]) -> migrations.RunPython:
    def drop(apps, schema_editor):
        for name, _, _ in indexes:
            schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')

    def create(apps, schema_editor):
        for name, table, column in indexes:
            drop_invalid_index(schema_editor, name)
            schema_editor.execute(
                f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{name}" '
                f'ON "{table}" ("{column}")'
            )

    return migrations.RunPython(drop, create)
