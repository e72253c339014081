from core.commands import ServiceCommand
from documents.services.organisations import member_add, organisation_get


class Command(ServiceCommand):
    help = "Add a user to an organisation, creating the user if needed."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("username")
        parser.add_argument("--password", default=None)
        parser.add_argument("--staff", action="store_true", help="operator: may use the admin")

    def handle(self, *args, slug, username, password, staff, **options):
        organisation = organisation_get(slug=slug)
        user = member_add(
            organisation=organisation, username=username, password=password, staff=staff
        )
        role = " (staff)" if user.is_staff else ""
        self.stdout.write(f"{user.get_username()}{role} is a member of {organisation.slug}")
