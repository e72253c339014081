import logging
import time

from django.core.management.base import BaseCommand
from django.db import close_old_connections

from connectors import base as connectors_base
from connectors import loop as connectors_loop
from connectors.loop import connectors_maintain, connectors_sync_due

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = (
        "Sync the connected folders that are due (or, with --loop, keep syncing them every "
        f"{connectors_loop.LOOP_SECONDS:g} s, with providers' upkeep every "
        f"{connectors_base.MAINTAIN_SECONDS:g} s)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--loop", action="store_true")

    def handle(self, *args, loop, **options):
        if not loop:
            connectors_maintain()
            self.stdout.write(f"connectors: {connectors_sync_due()} synced")
            return
        try:
            _loop()
        except KeyboardInterrupt:  # Ctrl+C reaches run_workers' children too: stop quietly
            return


def _loop() -> None:
    """Sync the due connections every loop interval, providers' upkeep every maintain
    interval, until stopped."""
    maintain_due = time.monotonic()
    while True:
        try:
            close_old_connections()
            if time.monotonic() >= maintain_due:
                maintain_due = time.monotonic() + connectors_base.MAINTAIN_SECONDS
                connectors_maintain()
            connectors_sync_due()
        except Exception:  # keep syncing through database hiccups
            logger.exception("connectors pass failed; trying again")
        time.sleep(connectors_loop.LOOP_SECONDS)
