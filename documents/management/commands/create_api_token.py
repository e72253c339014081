from core.commands import ServiceCommand
from documents.services.organisations import organisation_get
from documents.services.tokens import api_token_create


class Command(ServiceCommand):
    help = "Create an API token for an organisation. The token is the last line printed."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--name", default="")

    def handle(self, *args, slug, name, **options):
        organisation = organisation_get(slug=slug)
        token, raw = api_token_create(organisation=organisation, name=name)
        self.stderr.write(f"Token {token.prefix}… for {organisation.slug}; it is shown only once.")
        self.stdout.write(raw)
