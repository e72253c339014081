from core.commands import ServiceCommand
from documents.models import Membership
from documents.services.organisations import organisation_get
from documents.services.tokens import api_token_create


class Command(ServiceCommand):
    help = "Create an API token for an organisation. The token is the last line printed."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--name", default="")
        parser.add_argument(
            "--role",
            choices=Membership.Role.values,
            default=Membership.Role.MEMBER,
            help="what the token may do (default: member: read, upload, retry, cancel)",
        )

    def handle(self, *args, slug, name, role, **options):
        organisation = organisation_get(slug=slug)
        token, raw = api_token_create(organisation=organisation, name=name, role=role)
        self.stderr.write(
            f"Token {token.prefix}… ({token.role}) for {organisation.slug}; it is shown only once."
        )
        self.stdout.write(raw)
