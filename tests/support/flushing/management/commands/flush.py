from django.core.management.commands import flush
from django.db import connections, transaction

# Written once by migrate's post_migrate handlers; no test changes them.
KEPT = {"django_content_type", "auth_permission"}


class Command(flush.Command):
    def handle(self, **options):
        if options.get("reset_sequences", True):
            # Asked for by a test marked reset_sequences, or by a flush from the command line.
            return super().handle(**options)
        connection = connections[options["database"]]
        quote = connection.ops.quote_name
        with transaction.atomic(using=connection.alias), connection.cursor() as cursor:
            # Django's foreign keys are checked at commit, so the order of the deletes
            # does not matter. A DELETE of a few rows costs a fraction of a TRUNCATE,
            # which gives each table (and each of its indexes) a new file.
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")
            for table in sorted(_tables_with_rows(connection) - KEPT):
                cursor.execute(f"DELETE FROM {quote(table)}")


def _tables_with_rows(connection) -> set[str]:
    names = connection.introspection.django_table_names(only_existing=True, include_views=False)
    quote = connection.ops.quote_name
    probe = " UNION ALL ".join(
        f"SELECT %s WHERE EXISTS (SELECT 1 FROM {quote(name)})" for name in names
    )
    with connection.cursor() as cursor:
        cursor.execute(probe, names)
        return {row[0] for row in cursor.fetchall()}
