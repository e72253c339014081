from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils.module_loading import import_string

from core.isolation import close_kept_child
from core.redis import redis_connection
from pipeline.broker import get_queue
from pipeline.hosts import host_name, process_name
from pipeline.logcontext import install_worker_logging
from pipeline.queues import PRIORITIES, priority_queue_names
from pipeline.rq_workers import lane_worker_class
from pipeline.stage_list import STAGES, stage_spec

# RQ's registration of a worker lasts this + 60 s past its last heartbeat, and an idle
# worker beats every this - 15 s: a worker that died leaves the dashboard in ~95 s
# (RQ's default, 420, kept a dead one listed as live for up to eight minutes).
WORKER_TTL_SECONDS = 35


class Command(BaseCommand):
    help = (
        "Run one RQ worker for the given stages: every lane of each, its preferred "
        "priority's first (run_workers starts these)."
    )

    def add_arguments(self, parser):
        parser.add_argument("stages", nargs="+", help="stage names, e.g. extract")
        parser.add_argument(
            "--prefers",
            choices=PRIORITIES,
            default=PRIORITIES[0],
            help="the priority whose lanes the worker takes first",
        )
        parser.add_argument("--burst", action="store_true", help="exit when the queues are empty")

    def handle(self, *args, stages, prefers, burst, **options):
        known = [spec.name for spec in STAGES]
        if unknown := [stage for stage in stages if stage not in known]:
            raise CommandError(f"unknown stage {', '.join(unknown)}; stages: {', '.join(known)}")
        # Lines written during a stage name its run, stage and attempt.
        install_worker_logging()
        for stage in stages:
            if warm_up := stage_spec(stage).warm_up:
                warm_up()
        worker_class = lane_worker_class(import_string(settings.PAPERLANE_WORKER_CLASS))
        # The preferred priority's lanes first: the dashboard reads the preference from it.
        order = (prefers, *(p for p in PRIORITIES if p != prefers))
        queues = [
            get_queue(name)
            for priority in order
            for stage in stages
            for name in priority_queue_names(stage, priority)
        ]
        # host.pid.stages (callers read the pid second from the end); bulk-first workers
        # say so: host.pid.extract-bulk.
        served = "+".join(stages) + ("" if prefers == PRIORITIES[0] else f"-{prefers}")
        name = process_name(served)
        worker = worker_class(
            queues,
            connection=redis_connection(),
            name=name,
            worker_ttl=WORKER_TTL_SECONDS,
            prefers=prefers,
        )
        worker.hostname = host_name()  # RQ's own field, shown by django-rq's pages
        try:
            worker.work(burst=burst, logging_level=settings.LOGGING["root"]["level"])
        finally:
            # The extraction's kept child (core/isolation.py) ends with its worker.
            close_kept_child()
