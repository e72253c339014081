from core.commands import ServiceCommand
from documents.services.organisations import organisation_get
from pipeline.services.reembed import documents_reembed
from pipeline.services.transitions import Actor


class Command(ServiceCommand):
    help = (
        "Re-embed the searchable chunks that are not on the current embedding model: each "
        "such document's run goes back to embed on the bulk lanes (from the text kept)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--organisation", metavar="SLUG", help="only this organisation")

    def handle(self, *args, organisation, **options):
        chosen = organisation_get(slug=organisation) if organisation else None
        done = documents_reembed(actor=Actor("command:reembed"), organisation=chosen)
        self.stdout.write(
            f"{done.documents} document(s) have chunks on another model than {done.model}: "
            f"{done.started} sent back to embed on the bulk lanes, {done.in_pipeline} already "
            f"in the pipeline, {done.waiting} waiting for the retry of a failed run."
        )
