from django.conf import settings
from django.core.management.base import BaseCommand

from pipeline.broker import scheduler_run
from pipeline.hosts import host_name
from pipeline.queues import all_queue_names


class Command(BaseCommand):
    help = "Move scheduled jobs (retries waiting out their backoff) onto their queues."

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=int, default=1, help="seconds between checks")

    def handle(self, *args, interval, **options):
        scheduler_run(
            all_queue_names(),
            interval=interval,
            hostname=host_name(),
            level=settings.LOGGING["root"]["level"],
        )
