from django.core.management.base import CommandError

from connectors.services import connection_credentials_reencrypt
from core.commands import ServiceCommand


class Command(ServiceCommand):
    help = (
        "Rewrite every connection's stored credentials under the newest of "
        "PAPERLANE_CONNECTOR_KEYS, so that older keys can be removed."
    )

    def handle(self, *args, **options):
        report = connection_credentials_reencrypt()
        self.stdout.write(
            f"{report.reencrypted} re-encrypted with the newest key, {report.current} already were."
        )
        if report.unreadable:
            ids = ", ".join(str(i) for i in report.unreadable)
            raise CommandError(
                f"{len(report.unreadable)} cannot be read with any configured key "
                f"(connections {ids}): they must be connected again."
            )
