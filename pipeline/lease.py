"""Keep a worker's hold on its current run alive while the stage works.

One daemon thread per worker process renews the lease every third of its
length. If the process dies, renewals stop and the sweeper hands the stage to
another worker once the lease has expired.
"""

import logging
import os
import signal
import threading
import time
import uuid

from django.conf import settings
from django.db import close_old_connections, connection

from pipeline.logcontext import current_log_context, run_log_context
from pipeline.services.workers import run_renew_lease

logger = logging.getLogger(__name__)

# A stage still running this long past its timeout is hung: its worker is stopped.
HUNG_MARGIN_SECONDS = 30


class LeaseKeeper:
    """Renews the current lease, and stops a stage that outlives its timeout.

    RQ's timeout is an exception raised by an alarm; code that catches every
    exception, or a long call into C, can outlast it. Past its deadline the
    stage is hung: the keeper ends the worker process (the supervisor starts a
    fresh one) and the expired lease counts as a crash, so a file that hangs
    workers again and again becomes poison instead of holding a worker forever.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current: tuple[uuid.UUID, str] | None = None
        self._deadline = 0.0
        self._lost = False
        self._thread: threading.Thread | None = None
        self._log_fields: dict[str, str] = {}
        self._released = threading.Event()

    def hold(self, *, run_id: uuid.UUID, owner: str, timeout: float) -> None:
        with self._lock:
            self._current, self._lost = (run_id, owner), False
            # Only the log fields: the whole context would hand this thread's
            # database connection (a context variable in Django) to the keeper.
            self._log_fields = current_log_context()
            self._deadline = time.monotonic() + timeout + HUNG_MARGIN_SECONDS
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="lease-keeper", daemon=True)
            self._thread.start()

    def release(self) -> None:
        with self._lock:
            self._current = None
        # The keeper closes its database connection now, not a tick later: a worker
        # between stages holds no connection of the keeper's.
        self._released.set()

    @property
    def lost(self) -> bool:
        return self._lost

    def _loop(self) -> None:
        while True:
            self._released.wait(max(settings.PAPERLANE_LEASE_SECONDS / 3, 0.2))
            self._released.clear()
            with self._lock:
                current, deadline, fields = self._current, self._deadline, self._log_fields
            if current is None:
                # Idle between stages: hold no database connection of this thread's.
                connection.close()
                continue
            with run_log_context(**fields):
                self._tick(current, deadline)

    def _tick(self, current: tuple[uuid.UUID, str], deadline: float) -> None:
        if time.monotonic() > deadline:
            logger.error("run %s: stage hung past its timeout; stopping this worker", current[0])
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            close_old_connections()
            if not run_renew_lease(run_id=current[0], owner=current[1]):
                with self._lock:
                    if self._current == current:
                        self._lost = True
        except Exception:  # a database hiccup: try again at the next tick
            logger.warning("could not renew the lease of run %s", current[0], exc_info=True)


keeper = LeaseKeeper()
