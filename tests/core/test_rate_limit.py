"""The one rate limiter (core/rate_limit.py) in the real Redis: counted on Redis's clock,
by cost, under several rules all or none; slots given back or expired; holds that hold.
The API's use is in tests/api/test_rate_limit.py, the embedding provider's in
tests/retrieval/test_http_embedder.py."""

import time
from dataclasses import replace

import pytest

from core.rate_limit import RateLimitUnavailable, Rule, rate_hold, rate_release, rate_take

HOLD = "test:rate:hold"


def test_callers_whose_clocks_differ_share_one_window(redis_conn, monkeypatch):
    rule = Rule(key="test:rate:clock", limit=2, window_seconds=60)
    host_time = time.time

    assert rate_take(rules=[rule]) == {}
    monkeypatch.setattr(time, "time", lambda: host_time() + 3600)  # a host an hour ahead
    assert rate_take(rules=[rule]) == {}
    ahead = rate_take(rules=[rule])
    monkeypatch.setattr(time, "time", lambda: host_time() - 3600)  # one an hour behind
    behind = rate_take(rules=[rule])

    # Both are refused by the two calls already in the same minute, whatever their clocks.
    assert 55 < behind[rule.key] <= ahead[rule.key] <= 60
    assert redis_conn.zcard(rule.key) == 2
    seconds, micros = redis_conn.time()
    for _, at in redis_conn.zrange(rule.key, 0, -1, withscores=True):
        assert abs(at - (seconds * 1_000_000 + micros)) < 5_000_000  # Redis's time


def test_a_call_counts_its_cost_not_one(redis_conn):
    tokens = Rule(key="test:rate:tokens", limit=100, window_seconds=30, cost=60)

    assert rate_take(rules=[tokens]) == {}
    assert rate_take(rules=[replace(tokens, cost=40)]) == {}
    refused = rate_take(rules=[replace(tokens, cost=1)])

    # Two calls, but the 100 of their costs fill the window.
    assert 25 < refused[tokens.key] <= 30
    assert redis_conn.zcard(tokens.key) == 2
    # A call over the limit counts as the limit: it waits for an empty window, not forever.
    assert 25 < rate_take(rules=[replace(tokens, cost=500)])[tokens.key] <= 30


def test_rules_are_taken_all_or_none(redis_conn):
    wide = Rule(key="test:rate:wide", limit=3, window_seconds=30)
    narrow = Rule(key="test:rate:narrow", limit=1, window_seconds=30)

    assert rate_take(rules=[wide, narrow]) == {}
    refused = rate_take(rules=[wide, narrow])

    assert list(refused) == [narrow.key]  # only the rule that refused says how long
    assert (redis_conn.zcard(wide.key), redis_conn.zcard(narrow.key)) == (1, 1)
    # The refused call took nothing from the wide rule: two more fit in it, not one.
    assert rate_take(rules=[wide]) == {}
    assert rate_take(rules=[wide]) == {}
    assert list(rate_take(rules=[wide])) == [wide.key]


def test_a_slot_in_flight_is_given_back_or_expires(redis_conn):
    # Lifetimes a second apart: a slow machine's sleeps overshoot by far less.
    slot = Rule(key="test:rate:in-flight", limit=2, window_seconds=2)

    assert rate_take(rules=[slot], entry="lost") == {}  # its caller dies: never given back
    time.sleep(0.5)
    assert rate_take(rules=[slot], entry="second") == {}
    wait = rate_take(rules=[slot])[slot.key]  # full while both are in flight
    rate_release(rules=[slot], entry="second")
    assert rate_take(rules=[slot], entry="third") == {}  # given back: free at once

    # The lost one leaves when its lifetime ends, while the third is still in flight.
    assert 0 < wait <= 1.55
    time.sleep(wait + 0.05)
    assert rate_take(rules=[slot], entry="fourth") == {}
    assert list(rate_take(rules=[slot])) == [slot.key]


def test_a_hold_admits_nothing_until_it_has_passed(redis_conn):
    rule = Rule(key="test:rate:held", limit=10, window_seconds=30)

    rate_hold(key=HOLD, seconds=0.8)
    rate_hold(key=HOLD, seconds=0.1)  # a shorter hold leaves the longer one standing
    refused = rate_take(rules=[rule], hold_key=HOLD)

    assert list(refused) == [HOLD] and 0.5 < refused[HOLD] <= 0.8
    assert not redis_conn.exists(rule.key)  # nothing counted while held
    time.sleep(refused[HOLD] + 0.05)
    assert rate_take(rules=[rule], hold_key=HOLD) == {}
    assert redis_conn.zcard(rule.key) == 1


def test_without_redis_a_workers_call_fails_as_transient_and_a_requests_is_let_through(
    settings,
):
    rule = Rule(key="test:rate:away", limit=1, window_seconds=30)
    settings.REDIS_URL = "redis://127.0.0.1:1/14"  # nothing listens there

    with pytest.raises(RateLimitUnavailable) as failed:
        rate_take(rules=[rule])
    assert isinstance(failed.value, ConnectionError)  # what a stage retries
    assert rate_take(rules=[rule], fail_open=True) == {}
    rate_release(rules=[rule], entry="gone")  # best effort: its entry expires anyway
