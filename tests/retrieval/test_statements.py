"""The settings a search's statements run under (retrieval/statements.py): each statement
planned for its own words however often the connection has run it, held to the search's
time, and none of it left behind in a caller's transaction."""

import pytest
from django.db import connection, transaction

from retrieval.search import documents_search, within_search_time
from tests.support.runs import document_with_chunks

pytestmark = pytest.mark.django_db

_WORDS = ["harbour", "pilot", "anchor", "compass", "lantern", "rudder", "keel", "mast"]


def _settings(*names: str) -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT n, current_setting(n) FROM unnest(%s::text[]) n", [list(names)])
        return dict(cursor.fetchall())


def test_a_search_statement_run_again_and_again_is_planned_for_its_own_words(org):
    # The connection prepares a statement once it has run it five times; after five
    # custom plans PostgreSQL may then keep one generic plan for every query of as many
    # words, whatever their words match.
    for n, word in enumerate(_WORDS):
        document_with_chunks(org, f"{word}.pdf", [f"the {word} log, page {n}"] * (n + 1))

    for first, second in zip(_WORDS, reversed(_WORDS), strict=True):
        for _ in range(2):
            assert documents_search(organisation=org, query=f"{first} {second}").hits

    with connection.cursor() as cursor:
        cursor.execute(
            # Of the text lookup, of every shape this connection has prepared.
            "SELECT sum(generic_plans), sum(custom_plans) FROM pg_prepared_statements "
            "WHERE statement LIKE %s",
            ["%excluded AS%"],
        )
        generic, custom = cursor.fetchone()
    assert custom >= 10  # prepared, and run as such
    assert generic == 0


def test_a_searchs_statements_run_under_its_settings(org, settings):
    settings.PAPERLANE_SEARCH_TIMEOUT_MS = 1234

    names = ("statement_timeout", "plan_cache_mode", "jit")

    inside = within_search_time(lambda local: _settings(*names))

    assert inside == {
        "statement_timeout": "1234ms",
        "plan_cache_mode": "force_custom_plan",
        "jit": "off",
    }


def test_a_search_in_a_callers_transaction_leaves_the_callers_settings_as_they_were(org):
    # The test runs in a transaction, as a view in an atomic block would.
    document_with_chunks(org, "log.pdf", ["the harbour pilot's log"])
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL statement_timeout = '7s'")
    names = ("statement_timeout", "plan_cache_mode", "jit", "enable_seqscan")
    before = _settings(*names)

    assert documents_search(organisation=org, query="harbour pilot").hits

    assert (
        _settings(*names)
        == before
        == {
            "statement_timeout": "7s",
            "plan_cache_mode": "auto",
            "jit": "on",
            "enable_seqscan": "on",
        }
    )


@pytest.mark.django_db(transaction=True)  # autocommit turned off by hand, no atomic block
def test_a_search_in_a_transaction_opened_by_hand_leaves_its_settings_as_they_were(org):
    transaction.set_autocommit(False)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL statement_timeout = '7s'")

        within_search_time(lambda local: None)

        assert _settings("statement_timeout", "plan_cache_mode", "jit") == {
            "statement_timeout": "7s",
            "plan_cache_mode": "auto",
            "jit": "on",
        }
    finally:
        transaction.rollback()
        transaction.set_autocommit(True)
