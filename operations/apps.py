from django.apps import AppConfig


class OperationsConfig(AppConfig):
    name = "operations"
    verbose_name = "Operations"

    def ready(self) -> None:
        from operations.reembed import reembed_resume
        from pipeline.sweeper import sweeper_housekeeping_register
        from retrieval.vector_index import chunk_vectors_housekeeping

        # A re-embed whose job was lost with its worker goes on at the next housekeeping.
        sweeper_housekeeping_register("re-embeds resumed", reembed_resume)
        # Chunks with no vector (written before the column existed) get one, in bounded passes.
        sweeper_housekeeping_register("chunk vectors filled", chunk_vectors_housekeeping)
