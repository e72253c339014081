from django.core.management.base import CommandError

from connectors.services import connection_credentials_reencrypt
from core.commands import ServiceCommand
from webhooks.services import endpoint_secrets_reencrypt


class Command(ServiceCommand):
    help = (
        "Rewrite every connection's stored credentials and every webhook endpoint's signing "
        "secrets under the newest of PAPERLANE_CONNECTOR_KEYS, so that older keys can be removed."
    )

    def handle(self, *args, **options):
        problems = []
        for what, report in (
            ("connections", connection_credentials_reencrypt()),
            ("webhook endpoints", endpoint_secrets_reencrypt()),
        ):
            self.stdout.write(
                f"{what}: {report.reencrypted} re-encrypted with the newest key, "
                f"{report.current} already were."
            )
            if report.unreadable:
                ids = ", ".join(str(i) for i in report.unreadable)
                problems.append(f"{what} {ids}")
        if problems:
            raise CommandError(
                "Cannot be read with any configured key: "
                + "; ".join(problems)
                + ". Those connections must be connected again, those endpoints given a new "
                "secret (rotated)."
            )
