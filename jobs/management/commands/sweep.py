import logging
import time

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections

from jobs.sweeper import sweep_once

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "One sweeper pass (or, with --loop, one every PAPERLANE_SWEEP_INTERVAL_SECONDS)."

    def add_arguments(self, parser):
        parser.add_argument("--loop", action="store_true")

    def handle(self, *args, loop, **options):
        if not loop:
            self.stdout.write(f"sweep: {sweep_once()}")
            return
        while True:
            try:
                close_old_connections()
                sweep_once()
            except Exception:  # keep sweeping through database or Redis hiccups
                logger.exception("sweep failed; trying again")
            time.sleep(settings.PAPERLANE_SWEEP_INTERVAL_SECONDS)
