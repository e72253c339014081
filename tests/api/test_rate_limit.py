"""Requests per API token, counted in the real Redis: past the limit a 429 with Retry-After;
other tokens are not held back; a Redis that is down or silent limits nothing."""

import time

import pytest
from django.test import Client

from core.rate_limit import Rule, rate_take
from core.redis import REQUEST_TIMEOUT_SECONDS, request_breaker
from documents.services.tokens import api_token_create
from tests.support.silent import silent_server

pytestmark = pytest.mark.django_db


def token_client(organisation) -> Client:
    _, raw = api_token_create(organisation=organisation, name="rate")
    return Client(HTTP_AUTHORIZATION=f"Bearer {raw}")


def test_a_token_past_its_rate_gets_429_with_retry_after(org, settings, redis_conn):
    settings.PAPERLANE_API_RATE_PER_MINUTE = 3
    busy, other = token_client(org), token_client(org)

    answers = [busy.get("/api/v1/quota").status_code for _ in range(3)]
    refused = busy.get("/api/v1/quota")

    assert answers == [200, 200, 200]
    assert refused.status_code == 429
    body = refused.json()
    assert body["code"] == "rate_limited" and "3 requests in the last minute" in body["detail"]
    retry_after = int(refused["Retry-After"])
    assert 0 < retry_after <= 60 and body["retry_after"] == retry_after
    # Every route of the API is counted, and a refusal does not count: the wait stays,
    # and the window holds the three admitted requests only.
    again = busy.get("/api/v1/documents")
    assert again.status_code == 429 and int(again["Retry-After"]) <= retry_after
    [log] = list(redis_conn.scan_iter("paperlane:rate:api-token:*", _type="ZSET"))
    assert redis_conn.zcard(log) == 3
    # Another token of the same organisation has its own count.
    assert other.get("/api/v1/quota").status_code == 200


def test_without_a_token_the_answer_is_401_not_a_count(org, settings, redis_conn):
    settings.PAPERLANE_API_RATE_PER_MINUTE = 1

    answers = [Client().get("/api/v1/quota").status_code for _ in range(3)]

    assert answers == [401, 401, 401]
    assert not redis_conn.keys("paperlane:rate:api-token:*")


def test_the_window_slides(redis_conn):
    key = "paperlane:rate:api-token:test"
    rule = Rule(key=key, limit=2, window_seconds=1)

    assert rate_take(rules=[rule], fail_open=True) == {}
    assert rate_take(rules=[rule], fail_open=True) == {}
    wait = rate_take(rules=[rule], fail_open=True)[key]
    assert 0 < wait <= 1

    time.sleep(wait + 0.05)

    assert rate_take(rules=[rule], fail_open=True) == {}
    assert 0 < redis_conn.pttl(key) <= 1000


def test_a_zero_rate_limits_nothing(org, settings, redis_conn):
    settings.PAPERLANE_API_RATE_PER_MINUTE = 0
    client = token_client(org)

    assert {client.get("/api/v1/quota").status_code for _ in range(5)} == {200}
    assert not redis_conn.keys("paperlane:rate:api-token:*")


def test_with_redis_down_the_api_answers_unlimited(org, settings):
    settings.PAPERLANE_API_RATE_PER_MINUTE = 1
    client = token_client(org)
    settings.REDIS_URL = "redis://127.0.0.1:1/14"  # nothing listens there

    started = time.monotonic()
    answers = [client.get("/api/v1/quota").status_code for _ in range(3)]

    assert answers == [200, 200, 200]
    assert time.monotonic() - started < 2
    assert request_breaker().open


def test_with_redis_silent_a_request_waits_one_short_timeout_at_most(org, settings):
    settings.PAPERLANE_API_RATE_PER_MINUTE = 1
    client = token_client(org)
    with silent_server() as port:
        settings.REDIS_URL = f"redis://127.0.0.1:{port}/14"
        timings = []
        for _ in range(3):
            started = time.monotonic()
            assert client.get("/api/v1/quota").status_code == 200
            timings.append(time.monotonic() - started)

    # The first waits out the timeout; then the breaker leaves Redis alone.
    assert timings[0] < REQUEST_TIMEOUT_SECONDS + 1 and max(timings[1:]) < REQUEST_TIMEOUT_SECONDS
