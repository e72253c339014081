from core.commands import ServiceCommand
from documents.services.organisations import member_get, member_remove, organisation_get


class Command(ServiceCommand):
    help = (
        "Remove a user from an organisation; the connections they made there are paused "
        "(the user account itself stays)."
    )

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("username")

    def handle(self, *args, slug, username, **options):
        organisation = organisation_get(slug=slug)
        user = member_get(organisation=organisation, username=username)
        member_remove(organisation=organisation, user=user)
        self.stdout.write(f"{user.get_username()} is no longer a member of {organisation.slug}")
