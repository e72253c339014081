import time

from jobs.embedding import rate_limit_wait


def test_the_shared_embedding_budget_paces_requests(redis_conn, settings):
    settings.PAPERLANE_EMBED_RATE_PER_SECOND = 5
    started = time.monotonic()

    waits = [rate_limit_wait(key="test:ratelimit") for _ in range(10)]

    elapsed = time.monotonic() - started
    # A burst of 5 goes at once; the other 5 are paced at 5 per second.
    assert sum(1 for w in waits if w == 0) >= 5
    assert 0.7 <= elapsed <= 2.0


def test_no_limit_means_no_wait(redis_conn, settings):
    settings.PAPERLANE_EMBED_RATE_PER_SECOND = 0

    assert rate_limit_wait(key="test:ratelimit") == 0
