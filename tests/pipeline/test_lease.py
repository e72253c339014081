"""The lease keeper's own database connection: held while it renews, closed once released."""

from django.db import connection

from pipeline import lease
from tests.support.pipeline import wait_for


def _alive(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid])
        return cursor.fetchone()[0] == 1


def test_a_released_keeper_closes_its_connection_without_waiting_for_its_next_tick(
    transactional_db, settings, monkeypatch
):
    pids = []

    def renew(**kwargs):
        # A renewal on the keeper's own connection; the next tick is then minutes away.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pids.append(cursor.fetchone()[0])
        settings.PAPERLANE_LEASE_SECONDS = 600
        return True

    monkeypatch.setattr(lease, "run_renew_lease", renew)
    settings.PAPERLANE_LEASE_SECONDS = 0.6  # the first renewal after 0.2 s
    keeper = lease.LeaseKeeper()
    keeper.hold(run_id="r-1", owner="job@worker", timeout=60)
    [pid] = wait_for(lambda: pids, timeout=5, what="the keeper's renewal")
    assert _alive(pid)

    keeper.release()

    wait_for(lambda: not _alive(pid), timeout=5, what="the keeper's connection to close")
