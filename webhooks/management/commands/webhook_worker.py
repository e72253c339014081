from django.conf import settings
from django.core.management.base import BaseCommand

from core.redis import redis_connection
from pipeline.broker import get_queue
from pipeline.hosts import host_name, process_name
from pipeline.management.commands.stage_worker import WORKER_TTL_SECONDS
from pipeline.rq_workers import QueueWorker
from webhooks.dispatch import QUEUE


class Command(BaseCommand):
    help = "Run one RQ worker for the webhook deliveries (run_workers starts these)."

    def add_arguments(self, parser):
        parser.add_argument("--burst", action="store_true", help="exit when the queue is empty")

    def handle(self, *args, burst, **options):
        worker = QueueWorker(
            [get_queue(QUEUE)],
            connection=redis_connection(),
            name=process_name(QUEUE),
            worker_ttl=WORKER_TTL_SECONDS,
        )
        worker.hostname = host_name()
        worker.work(burst=burst, logging_level=settings.LOGGING["root"]["level"])
