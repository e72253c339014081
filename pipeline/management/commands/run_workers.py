import logging
import os

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError
from redis import Redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from pipeline.hosts import host_name, host_name_check
from pipeline.redis_check import redis_check
from pipeline.redis_watch import RedisWatch, watch_connection
from pipeline.stage_list import STAGES
from pipeline.supervisor import WEBHOOK_WORKER_COMMAND, Supervisor, default_children

logger = logging.getLogger(__name__)

# The start-up check waits this long for Redis: a silent one must not hold the workers.
CHECK_TIMEOUT_SECONDS = 3


class Command(BaseCommand):
    help = (
        "Run every stage worker (with its configured concurrency), the scheduler, the sweeper "
        "and the connectors loop."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--concurrency",
            default="",
            help="per-stage worker counts, e.g. extract=3,embed=2, and webhooks=N for the "
            "webhook workers (defaults from settings)",
        )
        parser.add_argument(
            "--host",
            default=None,
            help="the host name the workers go by (default PAPERLANE_HOST_NAME, else the "
            "machine's); give each supervisor on one machine its own",
        )

    def handle(self, *args, concurrency, host, **options):
        counts = {}
        for item in filter(None, concurrency.split(",")):
            name, _, value = item.partition("=")
            counts[name.strip()] = int(value)
        if host is not None:
            try:
                host_name_check(host)
            except ValueError as exc:
                raise CommandError(f"--host: {exc}") from None
            # The children read it from their environment, as they read every setting.
            os.environ["PAPERLANE_HOST_NAME"] = settings.PAPERLANE_HOST_NAME = host
        try:
            host = host_name()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        self._check_redis()
        children = default_children(concurrency=counts)
        summary = ", ".join(f"{s.name}x{counts.get(s.name, s.concurrency)}" for s in STAGES)
        webhooks = sum(WEBHOOK_WORKER_COMMAND in child.argv for child in children)
        self.stdout.write(
            f"Starting workers on host {host}: {summary}, webhooksx{webhooks}, scheduler, "
            "sweeper, connectors"
        )
        Supervisor(children, watch=RedisWatch(watch_connection(settings.REDIS_URL))).run()

    def _check_redis(self) -> None:
        connection = Redis.from_url(
            settings.REDIS_URL,
            socket_connect_timeout=CHECK_TIMEOUT_SECONDS,
            socket_timeout=CHECK_TIMEOUT_SECONDS,
            retry=Retry(NoBackoff(), 0),
        )
        try:
            for warning in redis_check(connection):
                logger.warning("Redis check: %s", warning)
                self.stderr.write(f"WARNING: {warning}")
        finally:
            connection.close()
