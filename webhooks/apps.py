from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    verbose_name = "Webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The pipeline never imports this app: it tells it of ended runs and deleted
        # documents through its listeners, and its sweeper wakes endpoints through a step.
        from pipeline.events import document_deleted_register, run_ended_register
        from pipeline.sweeper import sweeper_step_register
        from webhooks.dispatch import endpoints_wake_due
        from webhooks.payloads import document_deleted_publish, run_ended_publish

        run_ended_register(run_ended_publish)
        document_deleted_register(document_deleted_publish)
        sweeper_step_register("webhook endpoints woken", endpoints_wake_due)
