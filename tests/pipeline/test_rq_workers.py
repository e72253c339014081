"""A worker's command listener stops within a second of being asked, with real Redis and
RQ's own subscribe and unsubscribe."""

import threading

import pytest
from rq.worker import SimpleWorker

from core.redis import redis_connection
from pipeline.broker import get_queue
from pipeline.queues import stage_queue_names
from pipeline.rq_workers import (
    ForkingLaneWorker,
    LaneOrder,
    LaneWorker,
    PromptStop,
    lane_worker_class,
)
from tests.support.pipeline import wait_for


@pytest.mark.parametrize("worker_class", [LaneWorker, ForkingLaneWorker, SimpleWorker])
def test_an_idle_workers_listener_stops_at_once_after_reading_its_unsubscribe(
    redis_conn, worker_class
):
    queues = [get_queue(name) for name in stage_queue_names("create")]
    worker = lane_worker_class(worker_class)(queues, connection=redis_connection())
    worker.subscribe()
    wait_for(lambda: worker.pubsub.subscribed, timeout=5, what="the subscription")
    # The race a warm shutdown can lose: the listener reads the unsubscribe's reply
    # before it is told to stop, and then waits for a subscription that never comes.
    worker.pubsub.unsubscribe()
    wait_for(lambda: not worker.pubsub.subscribed, timeout=5, what="the reply to be read")

    stopping = threading.Thread(target=worker.unsubscribe, daemon=True)
    stopping.start()
    stopping.join(timeout=5)

    assert not stopping.is_alive(), "the listener still waits (RQ's own wait is 60 s)"
    assert not worker.pubsub_thread.is_alive()


def test_a_class_with_lanes_of_its_own_gets_the_prompt_stop_too():
    class OwnLanes(LaneOrder, SimpleWorker):
        pass

    made = lane_worker_class(OwnLanes)

    assert issubclass(made, OwnLanes) and issubclass(made, PromptStop)
    assert lane_worker_class(LaneWorker) is LaneWorker
