from connectors.services import connection_create_local
from core.commands import ServiceCommand
from documents.services.organisations import organisation_get


class Command(ServiceCommand):
    help = "Connect a local (or mounted) folder to an organisation; its files are only read."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("path")

    def handle(self, *args, slug, path, **options):
        organisation = organisation_get(slug=slug)
        connection = connection_create_local(organisation=organisation, path=path)
        self.stdout.write(f"connection {connection.id}: {connection.folder_path} for {slug}")
