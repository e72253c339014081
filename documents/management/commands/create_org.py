from core.commands import ServiceCommand
from documents.services.organisations import organisation_create


class Command(ServiceCommand):
    help = "Create an organisation with a page quota (or set the quota of an existing one)."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--pages", type=int, required=True, help="page limit")
        parser.add_argument("--name", default="")

    def handle(self, *args, slug, pages, name, **options):
        organisation = organisation_create(slug=slug, page_limit=pages, name=name)
        self.stdout.write(f"{organisation.slug}: {organisation.page_limit} pages")
