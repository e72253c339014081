from core.commands import ServiceCommand
from documents.services.organisations import organisation_get
from operations.reembed import reembed_enqueue


class Command(ServiceCommand):
    help = (
        "Re-embed, on the bulk lanes, the searchable chunks that are not on the current "
        "embedding model (from their stored texts); run it again to resume."
    )

    def add_arguments(self, parser):
        parser.add_argument("--organisation", metavar="SLUG", help="only this organisation")

    def handle(self, *args, organisation, **options):
        chosen = organisation_get(slug=organisation) if organisation else None
        queued = reembed_enqueue(organisation=chosen)
        self.stdout.write(
            f"{queued.documents} document(s) have chunks on another model than {queued.model}; "
            f"{queued.queued} re-embed job(s) queued on the bulk lanes "
            f"({queued.documents - queued.queued} already waiting or running)."
        )
