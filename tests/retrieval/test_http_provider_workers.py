"""Documents embedded through the HTTP provider by real worker processes (`run_workers`,
two embed workers) against a local /v1/embeddings server this test runs: whatever the
provider answers on the way, each run ends as it should, and the workers together never
send more than the shared limits allow, counted where the requests arrive."""

from collections import Counter

import pytest

from documents.models import Chunk
from pipeline.models import StageAttempt
from retrieval.provider_limit import estimate_tokens
from tests.support.embedding_server import EmbeddingServer, busy, failing, most_in_any_window, slow
from tests.support.files import make_pdf
from tests.support.pipeline import running_workers, wait_terminal
from tests.support.uploads import accepted_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

DIMENSIONS = 32
MODEL = "test-embed"


@pytest.fixture
def server():
    with EmbeddingServer(dimensions=DIMENSIONS) as running:
        running.key = "sk-test-key"
        yield running


def provider_env(server: EmbeddingServer, **extra: str) -> dict[str, str]:
    return {
        "PAPERLANE_EMBEDDER": "retrieval.http_embedder.HttpEmbedder",
        "PAPERLANE_EMBED_URL": server.url,
        "PAPERLANE_EMBED_MODEL": MODEL,
        "PAPERLANE_EMBEDDING_DIMENSIONS": str(DIMENSIONS),
        "PAPERLANE_EMBED_API_KEY_ENV": "TEST_EMBED_KEY",
        "TEST_EMBED_KEY": "sk-test-key",
        "PAPERLANE_EMBED_TIMEOUT_SECONDS": "1",
        "PAPERLANE_EMBED_BATCH_SIZE": "2",
        **extra,
    }


def process(api, server, documents: list[bytes], **env: str) -> dict:
    with running_workers(concurrency="extract=1,ocr=1,embed=2", **provider_env(server, **env)):
        runs = [accepted_run(api, data, name=f"doc{i}.pdf") for i, data in enumerate(documents)]
        return wait_terminal([run.id for run in runs], timeout=120)


def assert_on_the_model(run) -> None:
    chunks = Chunk.objects.filter(document=run.document_id)
    assert chunks.exists()
    assert set(chunks.values_list("embedding_model", flat=True)) == {f"{MODEL}-{DIMENSIONS}"}
    assert {len(bytes(c.embedding)) // 4 for c in chunks} == {DIMENSIONS}


def test_busy_failing_and_slow_answers_are_retried_and_every_run_succeeds(api, org, server):
    server.script = [busy("2"), failing(500), failing(503), slow(3), failing(502)]

    finished = process(
        api, server, [make_pdf(3, words_per_page=250, label=f"Tide {i}") for i in range(2)]
    )

    assert Counter(run.status for run in finished.values()) == {"succeeded": 2}
    for run in finished.values():
        assert_on_the_model(run)
    statuses = [r.status for r in server.requests]
    assert statuses[:5] == [429, 500, 503, 200, 502]  # the slow one answered after the timeout
    # The worker told to wait sent its batch again only after the Retry-After, and no
    # worker sent anything meanwhile but a request already on its way when the 429 came
    # back (both workers start together: the other's first batch can cross it).
    told, *later = server.requests
    again = next(r for r in later if r.inputs == told.inputs)
    assert again.at - told.at >= 2.0
    assert all(r.at - told.at < 0.25 or r.at - told.at >= 2.0 for r in later)
    transient = StageAttempt.objects.filter(stage="embed", outcome="transient_error")
    assert transient.count() >= 3  # the 500, the 503 and the timeout each ended an attempt
    assert any("did not answer within" in a.error_message for a in transient)


# Each case makes one limit the one that holds: requests, or tokens (a request of two
# chunks is about 600 tokens) with one request in flight at a time.
LIMITS = {"requests": (2, 0, 0), "tokens and concurrency": (0, 1300, 1)}


@pytest.mark.parametrize("limits", LIMITS.values(), ids=LIMITS.keys())
def test_two_workers_never_send_more_than_the_shared_limits(api, org, server, limits):
    window = 2.0
    requests, tokens, concurrency = limits
    documents = [make_pdf(2, words_per_page=300, label=f"Harbour {i}") for i in range(4)]

    finished = process(
        api,
        server,
        documents,
        PAPERLANE_EMBEDDER="tests.support.embedders.ShortWindowHttpEmbedder",
        EMBED_WINDOW_SECONDS=str(window),
        PAPERLANE_EMBED_REQUESTS_PER_MINUTE=str(requests),
        PAPERLANE_EMBED_TOKENS_PER_MINUTE=str(tokens),
        PAPERLANE_EMBED_CONCURRENCY=str(concurrency),
    )

    assert Counter(run.status for run in finished.values()) == {"succeeded": 4}
    embed_workers = set(StageAttempt.objects.filter(stage="embed").values_list("worker", flat=True))
    assert len(embed_workers) == 2  # both workers called the provider
    arrivals = [r.at for r in server.requests]
    assert len(arrivals) >= 8
    # Counted where the requests arrive, in any window a little shorter than the limits'
    # (for the moment between a permit and its request's arrival).
    span = window - 0.3
    if requests:
        assert most_in_any_window(arrivals, span) <= requests
    if tokens:
        costs = sorted((r.at, sum(estimate_tokens(t) for t in r.inputs)) for r in server.requests)
        assert max(cost for _, cost in costs) > tokens / 3  # the limit holds at two a window
        for start, _ in costs:
            assert sum(cost for at, cost in costs if start <= at < start + span) <= tokens
    if concurrency:
        assert server.most_in_flight <= concurrency


def test_a_refused_key_fails_the_run_at_once_naming_the_key(api, org, server):
    finished = process(api, server, [make_pdf(2)], TEST_EMBED_KEY="sk-revoked")

    [run] = finished.values()
    assert run.status == "failed"
    assert "TEST_EMBED_KEY" in run.error_message and "key" in run.error_message
    assert run.error_code == "embedding_key_refused"
    attempts = StageAttempt.objects.filter(run=run, stage="embed")
    assert [a.outcome for a in attempts] == ["permanent_error"]
    assert [r.status for r in server.requests] == [401]


def test_an_input_the_model_says_is_too_long_is_split_and_the_run_succeeds(api, org, server):
    server.max_input_chars = 400  # chunks are 1,200 characters

    finished = process(api, server, [make_pdf(2, words_per_page=250)])

    [run] = finished.values()
    assert run.status == "succeeded", run.error_message
    assert_on_the_model(run)
    assert server.answered(400)
    assert all(len(t) <= 400 for r in server.answered(200) for t in r.inputs)
