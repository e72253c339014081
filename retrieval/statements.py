"""The transaction a search's statements run in, and the settings they run under.

The statements that look a search's words and vectors up (the text lookup, the nearest
chunks, the passages and their counts, "Did you mean", the landing pages, a page's
marks) run inside `search_transaction()`, with, local to it:

- `statement_timeout` at PAPERLANE_SEARCH_TIMEOUT_MS: one search cannot hold a connection
  for long; its caller says what a cancelled one means (retrieval/search.py: a
  SearchTooSlow; retrieval/vectors.py: no neighbours, ranked by text).
- `plan_cache_mode` at `force_custom_plan`. The connection prepares a statement once it
  has run it five times (config/settings.py, server-side binding), and PostgreSQL plans
  a prepared statement for its parameters five times before it may keep one generic
  plan for every later use. A search's statement is the same text for every query of
  as many words, but not the same work: a rare word's chunks are a hundred, a common
  one's thousands. On its generic plan a phrase's text lookup took 66 to 95 ms where its
  own plan took 24 to 30 (bench/search.py, 100,000 chunks), and read its matches in
  another order. A plan costs about a millisecond; a search pays it each time.
- `jit` off. PostgreSQL compiles a statement whose estimated cost passes
  `jit_above_cost` (100,000 by default): a common word's estimate at 1,000,000 chunks
  does, and compiling the text lookup's 207 expressions took 92 ms of its 283, to save
  nothing measurable (183 ms without). A search's statements are short and bounded in
  time; compiling pays only in long analytical ones.

The block may set more (`SearchSettings.set`: the text lookup's, the vector index
walk's). Outside a transaction the commit ends them all, with no statement of its own.
Inside a caller's transaction (a view's atomic block, a test) they would outlast the
savepoint, so the caller's values of the settings each `set` brings are read first, and
all are put back at the end in one statement.
"""

from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import connection, transaction


class SearchSettings:
    """Settings local to the search's transaction; `cursor` runs its statements."""

    def __init__(self, cursor, nested: bool):
        self.cursor = cursor
        self._nested = nested
        # The caller's value of each setting changed; None where it had none (an
        # extension's setting before its library is loaded), put back by a reset.
        self._previous: dict[str, str | None] = {}

    def set(self, values: dict[str, str]) -> None:
        """Set each of `values` for the rest of the search's transaction, in one statement."""
        if self._nested:
            fresh = [name for name in values if name not in self._previous]
            if fresh:
                self.cursor.execute(
                    "SELECT n, current_setting(n, true) FROM unnest(%s::text[]) n", [fresh]
                )
                self._previous.update(self.cursor.fetchall())
        _set_local(self.cursor, values)

    def restore(self) -> None:
        """The caller's values back (inside a caller's transaction only)."""
        if self._previous:
            _set_local(self.cursor, self._previous)
            self._previous = {}


def _set_local(cursor, values: dict[str, str | None]) -> None:
    # set_config with a NULL value resets the setting to its default.
    cursor.execute(
        "SELECT count(set_config(n, v, true)) FROM unnest(%s::text[], %s::text[]) AS s(n, v)",
        [list(values), list(values.values())],
    )


@contextmanager
def search_transaction() -> Iterator[SearchSettings]:
    """A transaction (a savepoint inside a caller's) whose statements are held to
    PAPERLANE_SEARCH_TIMEOUT_MS, planned for their own parameters and not compiled. The
    driver's error for a cancelled statement leaves the block (SQLSTATE 57014,
    `is_cancelled`)."""
    # In a caller's transaction: an atomic block, or autocommit turned off by hand.
    nested = connection.in_atomic_block or not connection.get_autocommit()
    with transaction.atomic(), connection.cursor() as cursor:
        local = SearchSettings(cursor, nested)
        local.set(
            {
                "statement_timeout": str(settings.PAPERLANE_SEARCH_TIMEOUT_MS),
                "plan_cache_mode": "force_custom_plan",
                "jit": "off",
            }
        )
        yield local
        local.restore()


def is_cancelled(exc: BaseException) -> bool:
    """Whether a database error is a statement cancelled by its timeout."""
    return getattr(exc.__cause__, "sqlstate", None) == "57014"  # query_canceled
