"""The supervisor's watch on Redis: held restarts while it is down, a fresh start after
it restarts. Real processes and a private redis-server; no pipeline."""

import subprocess
import sys
import time

import pytest
from redis import Redis

from pipeline.redis_watch import RedisEvent, RedisWatch, watch_connection
from pipeline.supervisor import Child, Supervisor
from tests.support.redis_server import private_redis


def quick_child() -> Child:
    """A child that exits at once, as a worker does when Redis is gone."""
    return Child("worker", [sys.executable, "-c", "pass"])


@pytest.mark.slow
def test_the_watch_tells_down_back_and_restarted_apart():
    with private_redis() as server:
        watch = RedisWatch(watch_connection(server.url()), every=0)
        assert watch.check() is None and watch.up
        # The same server, silent for a while (a network blip), then answering again.
        Redis(port=server.port).client_pause(1500)
        assert watch.check() is RedisEvent.DOWN and not watch.up
        time.sleep(1.6)
        assert watch.check() is RedisEvent.BACK and watch.up
        server.kill()
        assert watch.check() is RedisEvent.DOWN
        assert watch.check() is None  # told once
        server.start()
        assert watch.check() is RedisEvent.RESTARTED and watch.up


def test_a_restart_is_seen_even_between_two_checks():
    with private_redis() as server:
        watch = RedisWatch(watch_connection(server.url()), every=0)
        watch.check()
        server.kill()
        server.start()
        assert watch.check() is RedisEvent.RESTARTED


def test_children_that_stop_while_redis_is_down_start_once_it_answers_without_a_pause():
    with private_redis() as server:
        watch = RedisWatch(watch_connection(server.url()), every=0)
        child = quick_child()
        supervisor = Supervisor([child], watch=watch)
        child.start()
        child.process.wait()
        server.kill()
        first = child.process
        for _ in range(3):
            supervisor._restart_dead()
            time.sleep(0.1)
        assert child.process is first, "restarted while Redis was down"
        server.start()
        supervisor._watch_redis(force=True)
        supervisor._restart_dead()
        assert child.process is not first and child.pause == 0
        child.process.wait()


def sleeper(name: str, *args: str) -> Child:
    return Child(name, [sys.executable, "-c", "import time; time.sleep(60)", *args])


@pytest.mark.slow
def test_after_a_redis_restart_every_stage_worker_is_restarted_warm():
    with private_redis() as server:
        watch = RedisWatch(watch_connection(server.url()), every=0)
        worker = sleeper("embed-1", "stage_worker", "embed")
        # The sweeper keeps nothing in Redis; restarting it would walk the storage again.
        sweeper = sleeper("sweeper", "sweep", "--loop")
        supervisor = Supervisor([worker, sweeper], watch=watch)
        watch.check()
        worker.start()
        sweeper.start()
        first, sweeping = worker.process, sweeper.process
        server.kill()
        server.start()
        supervisor._watch_redis()
        assert first.wait(timeout=10) != 0  # told to stop (SIGTERM)
        supervisor._restart_dead()
        assert worker.process is not first and worker.alive and worker.pause == 0
        with pytest.raises(subprocess.TimeoutExpired):
            sweeping.wait(timeout=1)  # never told to stop
        assert sweeper.process is sweeping
        for child in (worker, sweeper):
            child.process.kill()
            child.process.wait()


def test_a_child_that_dies_just_after_redis_came_back_starts_again_without_a_pause():
    # A worker retrying its connection through the outage dies only once the new
    # server answers: Redis's doing, not a crash loop of its own.
    with private_redis() as server:
        watch = RedisWatch(watch_connection(server.url()), every=0)
        child = quick_child()
        supervisor = Supervisor([child], watch=watch)
        watch.check()
        server.kill()
        server.start()
        supervisor._watch_redis()
        assert watch.up
        child.start()
        child.process.wait()
        supervisor._restart_dead()
        assert child.pause == 0
        child.process.wait()


def test_a_child_that_dies_at_once_with_redis_settled_is_restarted_after_a_pause():
    with private_redis() as server:
        watch = RedisWatch(watch_connection(server.url()), every=0)
        child = quick_child()
        supervisor = Supervisor([child], watch=watch)
        watch.check()
        child.start()
        first = child.process
        first.wait()
        supervisor._restart_dead()
        assert child.pause == 1.0 and child.process is first, "a crash loop without a pause"
