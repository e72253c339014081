import logging
import time

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import close_old_connections
from redis.exceptions import RedisError

from pipeline import sweeper
from pipeline.lag import lag_sample_record, stage_lags
from pipeline.sweeper import redis_lost_data, sweep_once

logger = logging.getLogger(__name__)

# How often, between passes, the loop looks for Redis having lost its data.
LOSS_CHECK_SECONDS = 0.5


class Command(BaseCommand):
    help = (
        "One full sweeper pass with the housekeeping (stored orphan files, old syncs). With "
        "--loop, a pass every PAPERLANE_SWEEP_INTERVAL_SECONDS and at once when Redis has "
        f"lost its data, and the housekeeping every {sweeper.HOUSEKEEPING_INTERVAL_SECONDS:.0f} s."
    )

    def add_arguments(self, parser):
        parser.add_argument("--loop", action="store_true")

    def handle(self, *args, loop, **options):
        if not loop:
            self.stdout.write(f"sweep: {sweep_once(housekeeping=True)}")
            return
        try:
            _loop()
        except KeyboardInterrupt:  # Ctrl+C reaches run_workers' children too: stop quietly
            return


def _loop() -> None:
    """Sweep every interval, the housekeeping every HOUSEKEEPING_INTERVAL_SECONDS of
    pipeline/sweeper.py, until stopped."""
    # The housekeeping walks a share of the storage: once at start, then every interval.
    housekeeping_due = time.monotonic()
    _redis_lost_data()  # sets the marker: this pass covers whatever came before
    while True:
        housekeeping = time.monotonic() >= housekeeping_due
        if housekeeping:
            housekeeping_due = time.monotonic() + sweeper.HOUSEKEEPING_INTERVAL_SECONDS
        try:
            close_old_connections()
            sweep_once(housekeeping=housekeeping, one_of_many=True)
            # Once a minute, each stage's lag for the dashboard's chart.
            lag_sample_record(read_lags=stage_lags)
        except Exception:  # keep sweeping through database or Redis hiccups
            logger.exception("sweep failed; trying again")
        _wait_for_next_pass(settings.PAPERLANE_SWEEP_INTERVAL_SECONDS)


def _wait_for_next_pass(interval: float) -> None:
    """Sleep until the next pass is due, or until Redis is seen to have lost its data:
    its waiting jobs are gone, and the stages wait for them until a pass."""
    deadline = time.monotonic() + interval
    while (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, LOSS_CHECK_SECONDS))
        if _redis_lost_data():
            logger.warning("Redis has lost its data (flushed, or restarted empty); sweeping now")
            return


def _redis_lost_data() -> bool:
    try:
        return redis_lost_data()
    except RedisError:  # Redis away: nothing to redeliver to yet
        return False
