import logging
import time

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections

from jobs.stats.history import lag_sample_record
from jobs.stats.snapshot import stage_lags
from jobs.sweeper import sweep_once

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = (
        "One full sweeper pass, stored orphan files included (or, with --loop, a pass every "
        "PAPERLANE_SWEEP_INTERVAL_SECONDS and the orphan walk every "
        "PAPERLANE_ORPHAN_SWEEP_INTERVAL_SECONDS)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--loop", action="store_true")

    def handle(self, *args, loop, **options):
        if not loop:
            self.stdout.write(f"sweep: {sweep_once(orphans=True)}")
            return
        # The orphan walk lists the whole storage: once at start, then every interval.
        orphans_due = time.monotonic()
        while True:
            orphans = time.monotonic() >= orphans_due
            if orphans:
                orphans_due = time.monotonic() + settings.PAPERLANE_ORPHAN_SWEEP_INTERVAL_SECONDS
            try:
                close_old_connections()
                sweep_once(orphans=orphans)
                # Once a minute, each stage's lag for the dashboard's chart.
                lag_sample_record(read_lags=stage_lags)
            except Exception:  # keep sweeping through database or Redis hiccups
                logger.exception("sweep failed; trying again")
            time.sleep(settings.PAPERLANE_SWEEP_INTERVAL_SECONDS)
