from django.apps import AppConfig


class OperationsConfig(AppConfig):
    name = "operations"
    verbose_name = "Operations"

    def ready(self) -> None:
        from pipeline.sweeper import sweeper_housekeeping_register
        from retrieval.vector_index import chunk_vectors_housekeeping

        # Chunks with no vector (written before the column existed) get one, in bounded passes.
        sweeper_housekeeping_register("chunk vectors filled", chunk_vectors_housekeeping)
