from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils.module_loading import import_string

from jobs.hosts import host_name, process_name
from jobs.logcontext import install_worker_logging
from jobs.queues import get_queue, redis_connection

# RQ's registration of a worker lasts this + 60 s past its last heartbeat, and an idle
# worker beats every this - 15 s: a worker that died leaves the dashboard in ~95 s
# (RQ's default, 420, kept a dead one listed as live for up to eight minutes).
WORKER_TTL_SECONDS = 35


class Command(BaseCommand):
    help = "Run one RQ worker for the given stage queues (run_workers starts these)."

    def add_arguments(self, parser):
        parser.add_argument("queues", nargs="+")
        parser.add_argument("--burst", action="store_true", help="exit when the queues are empty")

    def handle(self, *args, queues, burst, **options):
        # Lines written during a stage name its run, stage and attempt.
        install_worker_logging()
        worker_class = import_string(settings.PAPERLANE_WORKER_CLASS)
        name = process_name("+".join(queues))
        worker = worker_class(
            [get_queue(q) for q in queues],
            connection=redis_connection(),
            name=name,
            worker_ttl=WORKER_TTL_SECONDS,
        )
        worker.hostname = host_name()  # RQ's own field, shown by django-rq's pages
        worker.work(burst=burst, logging_level=settings.LOGGING["root"]["level"])
