"""Keep a worker's hold on its current run alive while the stage works.

One daemon thread per worker process renews the lease every third of its
length. If the process dies, renewals stop and the sweeper hands the stage to
another worker once the lease has expired.
"""

import logging
import threading
import time
import uuid

from django.conf import settings
from django.db import close_old_connections

logger = logging.getLogger(__name__)


class LeaseKeeper:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: tuple[uuid.UUID, str] | None = None
        self._lost = False
        self._thread: threading.Thread | None = None

    def hold(self, *, run_id: uuid.UUID, owner: str) -> None:
        with self._lock:
            self._current, self._lost = (run_id, owner), False
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="lease-keeper", daemon=True)
            self._thread.start()

    def release(self) -> None:
        with self._lock:
            self._current = None

    @property
    def lost(self) -> bool:
        return self._lost

    def _loop(self) -> None:
        from jobs.services import run_renew_lease

        interval = max(settings.PAPERLANE_LEASE_SECONDS / 3, 0.2)
        while True:
            time.sleep(interval)
            with self._lock:
                current = self._current
            if current is None:
                continue
            try:
                close_old_connections()
                if not run_renew_lease(run_id=current[0], owner=current[1]):
                    with self._lock:
                        if self._current == current:
                            self._lost = True
            except Exception:  # a database hiccup: try again at the next tick
                logger.warning("could not renew the lease of run %s", current[0], exc_info=True)


keeper = LeaseKeeper()
