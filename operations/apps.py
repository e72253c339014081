from django.apps import AppConfig


class OperationsConfig(AppConfig):
    name = "operations"
    verbose_name = "Operations"

    def ready(self) -> None:
        from operations.reembed import reembed_resume
        from pipeline.sweeper import sweeper_housekeeping_register

        # A re-embed whose job was lost with its worker goes on at the next housekeeping.
        sweeper_housekeeping_register("re-embeds resumed", reembed_resume)
