from django.apps import AppConfig
from django.conf import settings


class PipelineConfig(AppConfig):
    name = "pipeline"
    verbose_name = "Pipeline"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from pipeline import checks  # noqa: F401 - registers the OCR languages' check
        from pipeline.queues import rq_queue_settings  # imports models: only once apps are ready

        # django-rq's staff pages list the queues named here; the stage list is
        # the one place queues are declared.
        settings.RQ_QUEUES = rq_queue_settings()
