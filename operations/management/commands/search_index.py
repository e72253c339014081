from core.commands import ServiceCommand
from documents.services.vocabulary import vocabulary_rebuild
from retrieval.search_index import chunks_search_index_refresh


class Command(ServiceCommand):
    help = (
        "Refresh the search index's statistics (after a bulk load), and rebuild it if "
        "PAPERLANE_SEARCH_LANGUAGE changed (or with --rebuild); with --vocabulary, count "
        "the words \"Did you mean\" suggests again from the searchable documents (after "
        "chunks were loaded in bulk)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--rebuild", action="store_true", help="rebuild it in any case")
        parser.add_argument(
            "--vocabulary", action="store_true", help="count the vocabulary again too"
        )

    def handle(self, *args, rebuild, vocabulary, **options):
        self.stdout.write(chunks_search_index_refresh(rebuild=rebuild))
        if vocabulary:
            self.stdout.write(f"vocabulary counted again: {vocabulary_rebuild()} words")
