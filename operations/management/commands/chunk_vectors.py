from core.commands import ServiceCommand
from retrieval.embedding import get_embedder
from retrieval.vector_index import (
    chunk_vectors_backfill,
    vector_column_add,
    vector_index_ensure,
    vector_indexes_build,
)


class Command(ServiceCommand):
    help = (
        "Give search its vector index where PostgreSQL has pgvector: enable the extension and "
        "its column if need be, fill the column of chunks written before it, and build each "
        "model's HNSW index concurrently (writes go on meanwhile). With --current-model, also "
        "the index of the configured embedder's model, before any chunk of it is written."
    )

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=1000, help="chunks per transaction")
        parser.add_argument(
            "--current-model",
            action="store_true",
            help="build the index of the configured embedding model too, even with no chunk "
            "of it yet (run with the new model's settings before switching to it)",
        )

    def handle(self, *args, batch, current_model, **options):
        if not vector_column_add():
            self.stdout.write(
                "No vector extension on this database: search compares vectors one by one "
                "up to PAPERLANE_SEARCH_EXACT_SCAN_MAX_CHUNKS."
            )
            return
        for (model, dimensions), count in chunk_vectors_backfill(batch_size=batch).items():
            self.stdout.write(f"{model} ({dimensions} dimensions): {count:,} chunks filled")
        for model, dimensions in vector_indexes_build(concurrently=True):
            self.stdout.write(f"{model} ({dimensions} dimensions): index built")
        if current_model:
            embedder = get_embedder()
            built = vector_index_ensure(
                model=embedder.name, dimensions=embedder.dimensions, concurrently=True
            )
            said = "index built" if built else "index already there"
            self.stdout.write(f"{embedder.name} ({embedder.dimensions} dimensions): {said}")
        self.stdout.write("Vector index ready.")
