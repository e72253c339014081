from django.conf import settings
from django.core.management.base import BaseCommand
from rq.scheduler import RQScheduler

from core.redis import redis_connection
from pipeline.hosts import host_name
from pipeline.queues import all_queue_names


class Command(BaseCommand):
    help = "Move scheduled jobs (retries waiting out their backoff) onto their queues."

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=int, default=1, help="seconds between checks")

    def handle(self, *args, interval, **options):
        scheduler = RQScheduler(
            all_queue_names(),
            connection=redis_connection(),
            interval=interval,
            logging_level=settings.LOGGING["root"]["level"],
        )
        scheduler.hostname = host_name()
        scheduler.acquire_locks()
        scheduler.work()
