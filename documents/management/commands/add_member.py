from core.commands import ServiceCommand
from documents.models import Membership
from documents.services.organisations import member_add, organisation_get


class Command(ServiceCommand):
    help = "Add a user to an organisation, creating the user if needed."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("username")
        parser.add_argument("--password", default=None)
        parser.add_argument("--staff", action="store_true", help="operator: may use the admin")
        parser.add_argument(
            "--role",
            choices=Membership.Role.values,
            default=None,
            help="viewer (read), member (also upload, retry, cancel) or admin (also delete, "
            "tokens, connections, members); a newcomer is a member unless told",
        )

    def handle(self, *args, slug, username, password, staff, role, **options):
        organisation = organisation_get(slug=slug)
        user = member_add(
            organisation=organisation, username=username, password=password, staff=staff, role=role
        )
        membership = Membership.objects.get(organisation=organisation, user=user)
        operator = " (staff)" if user.is_staff else ""
        self.stdout.write(
            f"{user.get_username()}{operator} is {membership.get_role_display().lower()} "
            f"of {organisation.slug}"
        )
