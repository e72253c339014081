"""Hold PostgreSQL row locks from a connection of the test's own, to force the order in
which other processes' transactions meet: they queue on the lock, and go in the order
they queued once it is released."""

import time

import psycopg
from django.db import connection


class RowLock:
    """A transaction on a separate connection that holds the rows it locked until
    `release()` (or the end of the `with` block)."""

    def __init__(self) -> None:
        self._conn = another_connection()
        # Another session looks: one transaction sees pg_stat_activity as it first read it.
        self._observer = another_connection(autocommit=True)
        self._held = False

    def lock(self, sql: str, params: list) -> None:
        """Run `sql` (a SELECT … FOR UPDATE) in the held transaction."""
        assert self._conn.execute(sql, params).fetchall(), "nothing was locked"
        self._held = True

    def release(self) -> None:
        if self._held:
            self._conn.commit()
            self._held = False

    def waiting(self, like: str = "%") -> list[str]:
        """The queries of this database's sessions waiting on a lock, oldest first, of
        those whose text is LIKE `like`."""
        return sessions_waiting(self._observer, like)

    def wait_for_waiters(self, count: int, *, like: str = "%", timeout: float = 30) -> None:
        """Until `count` sessions wait on a lock with a query LIKE `like`."""
        _wait_for_waiters(self._observer, count, like=like, timeout=timeout)

    def __enter__(self) -> "RowLock":
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.release()
        finally:
            self._conn.close()
            self._observer.close()


def another_connection(*, autocommit: bool = False) -> psycopg.Connection:
    """A connection of its own to the test's database, as another process would have."""
    db = connection.settings_dict
    return psycopg.connect(
        host=db["HOST"],
        port=db["PORT"] or 5432,
        user=db["USER"],
        dbname=db["NAME"],
        autocommit=autocommit,
    )


def wait_for_lock_waiters(
    count: int = 1,
    *,
    like: str = "%",
    timeout: float = 30,
    observer: psycopg.Connection | None = None,
) -> None:
    """Until `count` sessions of the test's database wait on a lock with a query LIKE
    `like`, whoever holds it: for a lock taken by the code under test, not a RowLock.
    Looks from `observer` (autocommit) if given, else from a connection of its own."""
    if observer is not None:
        _wait_for_waiters(observer, count, like=like, timeout=timeout)
        return
    with another_connection(autocommit=True) as own:
        _wait_for_waiters(own, count, like=like, timeout=timeout)


def sessions_waiting(observer: psycopg.Connection, like: str = "%") -> list[str]:
    """The queries of this database's sessions waiting on a lock, oldest first, of those
    whose text is LIKE `like`, as `observer` (an autocommit connection) sees them."""
    rows = observer.execute(
        "SELECT query FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND query LIKE %s ORDER BY query_start",
        [like],
    ).fetchall()
    return [query for (query,) in rows]


def _wait_for_waiters(observer: psycopg.Connection, count: int, *, like: str, timeout: float):
    deadline = time.monotonic() + timeout
    while len(sessions_waiting(observer, like)) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {count} sessions on a lock ({like})")
        time.sleep(0.02)
