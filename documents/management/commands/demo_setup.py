from django.db import transaction

from core.commands import ServiceCommand
from documents.models import ApiToken, Membership
from documents.services.organisations import member_add, organisation_ensure
from documents.services.tokens import api_token_create, api_token_revoke

DEMO_SLUG = "demo"
DEMO_USER = "demo"
DEMO_PASSWORD = "paperlane-demo"


class Command(ServiceCommand):
    help = (
        "Create the demo organisation (or find it as it is: its page limit and the pages it "
        "used are kept), its user and a fresh API token, and print them."
    )

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--pages", type=int, default=1000, help="The page limit of a new demo organisation."
        )

    def handle(self, *args, port, pages, **options):
        organisation, _ = organisation_ensure(slug=DEMO_SLUG, page_limit=pages, name="Demo")
        member_add(
            organisation=organisation,
            username=DEMO_USER,
            password=DEMO_PASSWORD,
            staff=True,
            role=Membership.Role.ADMIN,
        )
        # The last start's token is replaced; if no new one can be made, it stays valid.
        with transaction.atomic():
            for old in ApiToken.objects.filter(
                organisation=organisation, name="demo", revoked_at=None
            ):
                api_token_revoke(token=old)
            _, raw = api_token_create(
                organisation=organisation, name="demo", role=Membership.Role.ADMIN
            )
        base = f"http://127.0.0.1:{port}"
        auth = f"-H 'Authorization: Bearer {raw}'"
        self.stdout.write(
            "\n".join(
                [
                    "",
                    "Paperlane demo",
                    f"  Upload page   {base}/   user {DEMO_USER} / password {DEMO_PASSWORD}",
                    f"  Admin         {base}/admin/   (same user)",
                    f"  API docs      {base}/api/v1/docs",
                    f"  API token     {raw}",
                    "",
                    "Try the API:",
                    f"  curl {auth} -F file=@some.pdf {base}/api/v1/documents",
                    f"  curl {auth} {base}/api/v1/quota",
                    "",
                ]
            )
        )
