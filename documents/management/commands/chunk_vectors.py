from core.commands import ServiceCommand
from documents.vectors_sql import (
    chunk_vectors_backfill,
    vector_column_add,
    vector_indexes_build,
)


class Command(ServiceCommand):
    help = (
        "Give search its vector index where PostgreSQL has pgvector: enable the extension and "
        "its column if need be, fill the column of chunks written before it, and build each "
        "model's HNSW index concurrently (writes go on meanwhile)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--batch", type=int, default=1000, help="chunks per transaction")

    def handle(self, *args, batch, **options):
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
        self.stdout.write("Vector index ready.")
