"""The HTTP embedding provider against a local /v1/embeddings server (real HTTP, real
Redis for the shared limits), called in this process: what each answer of the provider
becomes. tests/pipeline/test_http_provider_runs.py runs it in worker processes."""

import math
import threading

import pytest

from core.rate_limit import Rule, rate_take
from retrieval import provider_limit
from retrieval.http_embedder import (
    HttpEmbedder,
    ProviderRefused,
    ProviderUnavailable,
    endpoint_url,
)
from retrieval.provider_limit import (
    HOLD,
    IN_FLIGHT,
    REQUESTS,
    TOKENS,
    LimitReached,
    estimate_tokens,
    provider_permit,
)
from tests.support.embedding_server import (
    Answer,
    EmbeddingServer,
    busy,
    failing,
    most_in_any_window,
    slow,
)
from tests.support.pipeline import wait_for

DIMENSIONS = 32


def same(vectors, expected) -> bool:
    return len(vectors) == len(expected) and all(
        v == pytest.approx(e) for v, e in zip(vectors, expected, strict=True)
    )


@pytest.fixture
def server(settings, redis_conn):
    with EmbeddingServer(dimensions=DIMENSIONS) as running:
        settings.PAPERLANE_EMBED_URL = running.url
        settings.PAPERLANE_EMBED_MODEL = "test-embed"
        settings.PAPERLANE_EMBEDDING_DIMENSIONS = DIMENSIONS
        settings.PAPERLANE_EMBED_API_KEY_ENV = "TEST_EMBED_KEY"
        settings.PAPERLANE_EMBED_TIMEOUT_SECONDS = 2.0
        settings.PAPERLANE_EMBED_MAX_INPUT_TOKENS = 0
        yield running


def test_it_returns_the_providers_vectors_in_input_order_and_names_model_and_dimensions(server):
    texts = ["the tide tables", "a lighthouse keeper's log", "quarterly revenue"]

    vectors = HttpEmbedder().embed(texts)

    assert same(vectors, server.embedder.embed(texts))
    assert HttpEmbedder().name == f"test-embed-{DIMENSIONS}"
    assert [r.inputs for r in server.requests] == [texts]  # one request for the batch


def test_the_key_is_read_from_the_named_environment_variable(server, monkeypatch):
    server.key = "sk-right"
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-right")

    assert len(HttpEmbedder().embed(["hello"])) == 1


@pytest.mark.parametrize(
    ("url", "header"),
    [
        ("https://api.openai.com/v1", {"Authorization": "Bearer sk-k"}),
        ("https://r.openai.azure.com/openai/deployments/d?api-version=1", {"api-key": "sk-k"}),
        ("https://r.cognitiveservices.azure.com/openai/deployments/d", {"api-key": "sk-k"}),
        ("https://evil.com/.openai.azure.com/v1", {"Authorization": "Bearer sk-k"}),
    ],
)
def test_the_key_goes_in_azures_header_for_azure_and_as_a_bearer_token_elsewhere(
    server, settings, monkeypatch, url, header
):
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-k")
    settings.PAPERLANE_EMBED_URL = url

    assert HttpEmbedder()._headers() == header


@pytest.mark.parametrize(("model", "sent"), [("text-embedding-3-small", True), ("bge-m3", False)])
def test_only_models_that_shorten_their_vectors_are_sent_dimensions(server, settings, model, sent):
    settings.PAPERLANE_EMBED_MODEL = model

    assert len(HttpEmbedder().embed(["hello"])[0]) == DIMENSIONS
    assert server.requests[-1].dimensions == (DIMENSIONS if sent else None)


def test_a_refused_key_is_permanent_and_names_the_variable(server, monkeypatch):
    server.key = "sk-right"
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-wrong")

    with pytest.raises(ProviderRefused) as refused:
        HttpEmbedder().embed(["hello"])

    assert refused.value.code == "embedding_key_refused"
    assert "TEST_EMBED_KEY" in refused.value.message
    assert "sk-wrong" not in refused.value.message
    assert len(server.requests) == 1  # not tried again


@pytest.mark.parametrize(
    ("given", "sent"),
    [
        ("https://api.openai.com/v1", "https://api.openai.com/v1/embeddings"),
        ("https://api.openai.com/v1/", "https://api.openai.com/v1/embeddings"),
        ("https://api.openai.com/v1/embeddings", "https://api.openai.com/v1/embeddings"),
        ("http://localhost:11434/v1", "http://localhost:11434/v1/embeddings"),
        (
            "https://r.openai.azure.com/openai/deployments/d/embeddings?api-version=2024-02-01",
            "https://r.openai.azure.com/openai/deployments/d/embeddings?api-version=2024-02-01",
        ),
        (
            "https://r.openai.azure.com/openai/deployments/d?api-version=2024-02-01",
            "https://r.openai.azure.com/openai/deployments/d/embeddings?api-version=2024-02-01",
        ),
    ],
)
def test_the_url_may_be_the_base_openais_clients_take_or_the_endpoint(given, sent):
    assert endpoint_url(given) == sent


def test_a_base_url_is_sent_to_its_embeddings_endpoint(server, settings):
    settings.PAPERLANE_EMBED_URL = server.url.removesuffix("/embeddings")

    assert len(HttpEmbedder().embed(["hello"])[0]) == DIMENSIONS
    assert [r.path for r in server.requests] == ["/v1/embeddings"]


def test_a_404_that_names_no_model_blames_the_url(server):
    server.script = [Answer(404, {"error": {"message": "Not Found"}})]

    with pytest.raises(ProviderRefused) as refused:
        HttpEmbedder().embed(["hello"])

    assert refused.value.code == "embedding_refused"
    assert "PAPERLANE_EMBED_URL" in refused.value.message
    assert "model" not in refused.value.message.split(";")[0]


def test_an_unknown_model_is_permanent_and_names_the_model(server):
    server.models = {"another-model"}

    with pytest.raises(ProviderRefused) as refused:
        HttpEmbedder().embed(["hello"])

    assert refused.value.code == "embedding_model_refused"
    assert "test-embed" in refused.value.message


def test_server_errors_and_timeouts_are_transient(server):
    server.script = [failing(500), failing(503), slow(3)]

    for _ in range(3):
        with pytest.raises(ProviderUnavailable):
            HttpEmbedder().embed(["hello"])

    assert isinstance(ProviderUnavailable("x"), OSError)  # what the embed stage counts
    assert len(HttpEmbedder().embed(["hello"])) == 1


def test_a_429_is_waited_out_then_sent_again(server):
    server.script = [busy("1")]

    vectors = HttpEmbedder().embed(["hello"])

    assert same(vectors, server.embedder.embed(["hello"]))
    first, second = server.requests
    assert first.status == 429 and second.status == 200
    assert second.at - first.at >= 1.0  # measured by the server: it was asked to wait 1 s


def test_a_429_holds_every_worker(server, redis_conn):
    server.script = [busy("1")]
    told = threading.Thread(target=HttpEmbedder().embed, args=(["hello"],))
    told.start()
    wait_for(lambda: redis_conn.exists(HOLD), timeout=5, interval=0.01, what="the 429's hold")

    # A request from elsewhere, begun after the 429, is also held until it passed.
    HttpEmbedder().embed(["another worker's batch"])
    told.join(10)

    statuses = [r.status for r in server.requests]
    assert statuses == [429, 200, 200]
    assert server.requests[0].inputs == ["hello"]  # the other worker's came after the 429
    assert all(r.at - server.requests[0].at >= 1.0 for r in server.requests[1:])


def test_a_429_asking_for_longer_than_the_bound_ends_the_attempt(server, monkeypatch):
    monkeypatch.setattr("retrieval.http_embedder.RETRY_AFTER_MAX_SECONDS", 5)
    server.script = [busy("120")]

    with pytest.raises(ProviderUnavailable, match="429"):
        HttpEmbedder().embed(["hello"])
    assert len(server.requests) == 1


def _norm(vector):
    return math.sqrt(sum(x * x for x in vector))


def test_an_input_the_model_says_is_too_long_is_split_and_its_halves_averaged(server):
    server.max_input_chars = 100
    long = " ".join(f"word{i}" for i in range(60))  # about 410 characters
    texts = ["short one", long, "short two"]

    vectors = HttpEmbedder().embed(texts)

    assert len(vectors) == 3
    assert vectors[0] == pytest.approx(server.embedder.embed(["short one"])[0])
    assert vectors[2] == pytest.approx(server.embedder.embed(["short two"])[0])
    assert _norm(vectors[1]) == pytest.approx(1.0)
    sent = [text for r in server.answered(200) for text in r.inputs]
    assert all(len(text) <= 100 for text in sent)
    assert "".join(t for t in sent if t not in ("short one", "short two")) == long
    # The mean of its parts points where the whole would have: the same words.
    whole = server.embedder.embed([long])[0]
    assert sum(a * b for a, b in zip(vectors[1], whole, strict=True)) > 0.8


def test_an_input_over_the_max_input_tokens_is_split_before_it_is_sent(server, settings):
    settings.PAPERLANE_EMBED_MAX_INPUT_TOKENS = 30
    long = " ".join(f"word{i}" for i in range(60))

    HttpEmbedder().embed([long])

    assert server.answered(400) == []
    assert all(estimate_tokens(t) <= 30 for r in server.requests for t in r.inputs)


def test_vectors_of_another_length_than_the_setting_are_refused(server, settings):
    settings.PAPERLANE_EMBEDDING_DIMENSIONS = DIMENSIONS * 2

    with pytest.raises(ProviderRefused, match="PAPERLANE_EMBEDDING_DIMENSIONS"):
        HttpEmbedder().embed(["hello"])


def test_requests_and_tokens_stay_within_the_window(server, settings, monkeypatch):
    monkeypatch.setattr(provider_limit, "WINDOW_SECONDS", 1.0)
    settings.PAPERLANE_EMBED_REQUESTS_PER_MINUTE = 3
    settings.PAPERLANE_EMBED_TOKENS_PER_MINUTE = 0
    embedder = HttpEmbedder()

    for i in range(7):
        embedder.embed([f"text {i}"])

    arrivals = [r.at for r in server.requests]
    # Counted where the calls arrive; a little under the window for the time between
    # the permit and the arrival.
    assert most_in_any_window(arrivals, 0.9) <= 3
    assert len(arrivals) == 7


def test_the_token_budget_holds_back_a_request_that_would_pass_it(
    redis_conn, settings, monkeypatch
):
    monkeypatch.setattr(provider_limit, "WINDOW_SECONDS", 30.0)
    settings.PAPERLANE_EMBED_REQUESTS_PER_MINUTE = 0
    settings.PAPERLANE_EMBED_TOKENS_PER_MINUTE = 100
    settings.PAPERLANE_EMBED_CONCURRENCY = 0
    with provider_permit(tokens=60) as waited:
        assert waited == 0
    with provider_permit(tokens=40) as waited:
        assert waited == 0

    # 100 of 100 spent in this window: the next permit would wait until it has passed.
    refused = rate_take(rules=[Rule(key=TOKENS, limit=100, window_seconds=30.0)])
    assert 25 < refused[TOKENS] <= 30
    assert not redis_conn.exists(REQUESTS)  # no limit, nothing counted


def test_requests_tokens_and_slot_are_taken_all_or_none(server, settings, redis_conn):
    settings.PAPERLANE_EMBED_REQUESTS_PER_MINUTE = 10
    settings.PAPERLANE_EMBED_TOKENS_PER_MINUTE = 100
    settings.PAPERLANE_EMBED_CONCURRENCY = 1

    def counted():
        return tuple(redis_conn.zcard(key) for key in (REQUESTS, TOKENS, IN_FLIGHT))

    with provider_permit(tokens=90):
        assert counted() == (1, 1, 1)
    assert counted() == (1, 1, 0)  # the slot given back; the request and its tokens stay

    # A request and a slot are free, 26 tokens are not: nothing is taken, nothing sent.
    with pytest.raises(LimitReached):
        HttpEmbedder().embed(["x" * 100], max_seconds=0.3)
    assert counted() == (1, 1, 0)
    assert server.requests == []


def test_concurrent_requests_stay_within_the_concurrency(server, settings):
    settings.PAPERLANE_EMBED_CONCURRENCY = 2
    server.script = [slow(0.3) for _ in range(8)]
    threads = [
        threading.Thread(target=HttpEmbedder().embed, args=([f"text {i}"],)) for i in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert len(server.answered(200)) == 8
    assert server.most_in_flight == 2


def test_a_batch_over_the_concurrency_of_one_is_still_served(server, settings):
    settings.PAPERLANE_EMBED_CONCURRENCY = 1
    server.script = [Answer(), failing(502)]
    embedder = HttpEmbedder()
    embedder.embed(["one"])
    with pytest.raises(ProviderUnavailable):
        embedder.embed(["two"])
    # The failed request gave its slot back.
    assert len(embedder.embed(["three"])) == 1


def test_a_caller_who_waits_is_told_the_provider_is_busy_instead_of_waiting(server, settings):
    settings.PAPERLANE_EMBED_REQUESTS_PER_MINUTE = 1
    embedder = HttpEmbedder()
    embedder.embed(["the workers' batch"])  # the minute's one request is spent

    with pytest.raises(LimitReached):
        embedder.embed(["a search query"], max_seconds=0.5)
    assert len(server.requests) == 1  # nothing was sent past the limit


def test_a_caller_who_waits_gets_a_shorter_timeout(server, settings):
    server.script = [slow(3)]

    with pytest.raises(ProviderUnavailable, match="within 0.5 s"):
        HttpEmbedder().embed(["a search query"], max_seconds=0.5)


def test_a_429_saying_the_quota_is_used_up_is_permanent_and_names_the_quota(server):
    """OpenAI's answer when the account has no credit: a 429 that no wait ends."""
    quota = Answer(
        429,
        {
            "error": {
                "message": "You exceeded your current quota, please check your plan.",
                "type": "insufficient_quota",
                "code": "insufficient_quota",
            }
        },
        {"Retry-After": "1"},
    )
    server.script = [quota, quota]

    with pytest.raises(ProviderRefused) as refused:
        HttpEmbedder().embed(["hello"])

    assert refused.value.code == "embedding_refused"
    assert "quota" in refused.value.message
    assert len(server.requests) == 1  # not tried again
