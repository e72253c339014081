from core.commands import ServiceCommand
from retrieval.search_index import chunks_search_index_refresh


class Command(ServiceCommand):
    help = (
        "Refresh the search index's statistics (after a bulk load), and rebuild it if "
        "PAPERLANE_SEARCH_LANGUAGE changed (or with --rebuild)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--rebuild", action="store_true", help="rebuild it in any case")

    def handle(self, *args, rebuild, **options):
        self.stdout.write(chunks_search_index_refresh(rebuild=rebuild))
