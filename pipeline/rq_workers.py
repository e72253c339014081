"""The stage workers' RQ classes: RQ's own, with the lanes taken in turn and a prompt stop.

**Lanes in turn.** A worker reads every lane of its stages with one BLPOP (RQ's
`dequeue_any` over a fixed list of keys), so a new job is taken the moment it is pushed;
after each job it reorders that list: its own priority's lanes first, rotated so the lane
after the one just served comes first (lanes take turns), the other priority's lanes
after them (no idle worker while there is work), and every BULK_EVERY-th pick an
interactive-first worker puts the bulk lanes first (bulk work never starves). While the
provider a stage calls keeps failing (core/provider_breaker.py), the worker takes none of
that stage's jobs until the pause ends. A heavy job over its organisation's share of a
weighed stage goes back to the head of its lane, which the worker leaves alone for
REST_SECONDS (pipeline/fair_share.py).

**A prompt stop.** RQ listens for its commands (shut down, stop or kill the job) in a
pub/sub thread that waits up to `sleep_time` for a message; RQ asks for 60 s. Once that
thread has read the reply to the worker's unsubscribe, it waits that long for a
subscription that never comes, and since redis-py 8 stopping the thread waits for it. A
warm shutdown of an idle worker then took up to a minute: past the supervisor's 30 s
grace, so it ended cold. Listening in waits of a second bounds it, for a wake-up a second
per idle worker.
"""

import math
import time

from django.db import connections
from redis.exceptions import ConnectionError as RedisConnectionError
from rq import Queue
from rq.exceptions import DequeueTimeout
from rq.worker import BaseWorker, SimpleWorker, Worker, WorkerStatus

from core.provider_breaker import breaker
from pipeline import broker
from pipeline.fair_share import REST_SECONDS, Share
from pipeline.models import RunPriority
from pipeline.queues import PRIORITIES, queue_lane, queue_stage
from pipeline.stage_list import stage_spec

LISTEN_SECONDS = 1.0
# Every Nth job a worker that prefers interactive work takes, it looks at bulk work
# first, so bulk work moves while interactive work keeps arriving.
BULK_EVERY = 4


class PromptStop:
    """Mixed into an RQ worker class: its command listener waits at most LISTEN_SECONDS."""

    def subscribe(self: BaseWorker) -> None:
        self.log.info("Worker %s: subscribing to channel %s", self.name, self.pubsub_channel_name)
        self.pubsub = self.connection.pubsub()
        self.pubsub.subscribe(**{self.pubsub_channel_name: self.handle_payload})
        self.pubsub_thread = self.pubsub.run_in_thread(
            sleep_time=LISTEN_SECONDS,
            daemon=True,
            exception_handler=self._pubsub_exception_handler,
        )


# A worker waiting for a paused provider looks again (and beats) at least this often.
PAUSE_BEAT_SECONDS = 2.0
# A worker that has seen no provider fail asks whether one is paused at most this often.
PAUSE_LOOK_SECONDS = 0.5


class LaneOrder:
    """Mixed into an RQ worker class: orders the worker's lanes before each pick.

    `prefers` is the priority whose lanes come first. Queues that are no stage's
    lanes are read last, in the order given.
    """

    def __init__(self, queues, *args, prefers: str = RunPriority.INTERACTIVE, **kwargs) -> None:
        super().__init__(queues, *args, **kwargs)
        if prefers not in PRIORITIES:
            raise ValueError(f"unknown priority {prefers!r}; use one of {', '.join(PRIORITIES)}")
        self.prefers = prefers
        self.picks = 0
        self._lanes: dict[str, list[Queue]] = {priority: [] for priority in PRIORITIES}
        self._others: list[Queue] = []
        for queue in self.queues:
            lane = queue_lane(queue.name)
            (self._lanes[lane.priority] if lane else self._others).append(queue)
        # Per priority, the index of the lane that comes first at the next pick.
        self._next = dict.fromkeys(PRIORITIES, 0)
        self._ordered_queues = self.lane_order()
        # Stage -> the breaker of the provider it calls, for the stages read here that call one.
        self._providers = {}
        self._looked_at = float("-inf")
        self._share = Share()
        self._resting: dict[str, float] = {}
        for queue in self.queues:
            lane = queue_lane(queue.name)
            if lane and (provider := stage_spec(lane.stage).provider):
                self._providers[lane.stage] = breaker(provider)

    def first_priority(self) -> str:
        """The priority whose lanes the next pick looks at first."""
        if self.prefers == RunPriority.INTERACTIVE and self.picks % BULK_EVERY == BULK_EVERY - 1:
            return RunPriority.BULK
        return self.prefers

    def lane_order(self) -> list[Queue]:
        first = self.first_priority()
        order = []
        for priority in (first, *(p for p in PRIORITIES if p != first)):
            lanes, start = self._lanes[priority], self._next[priority]
            order += lanes[start:] + lanes[:start]
        return order + self._others

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        while True:
            result = self._dequeue(timeout, max_idle_time)
            if result is None:
                return None
            job, queue = result
            if self._share.admits(job):
                return result
            # Its organisation runs its share of heavy work already: back to the head of
            # its lane, which this worker leaves alone for a moment (pipeline/fair_share.py).
            broker.job_put_back(self.connection, queue.name, job.id)
            self._resting[queue.name] = time.monotonic() + REST_SECONDS

    def _dequeue(self, timeout, max_idle_time):
        # While a stage's provider keeps failing, its jobs wait in their queues, and while a
        # lane rests its jobs wait too: the worker takes the other lanes' jobs, or waits
        # (beating) until the pause or the rest ends.
        while True:
            paused = self._paused_stages()
            resting = self._resting_lanes()
            if not paused and not resting:
                break
            self.set_state(WorkerStatus.IDLE)  # a stop request now ends the worker at once
            self.heartbeat()
            wait = min([*paused.values(), *resting.values()])
            others = [
                q
                for q in self._ordered_queues
                if queue_stage(q.name) not in paused and q.name not in resting
            ]
            if not others:
                self.procline(f"Paused while {', '.join(sorted(paused))} waits for its provider")
                time.sleep(min(wait, PAUSE_BEAT_SECONDS))
                continue
            try:
                result = self.queue_class.dequeue_any(
                    # One key would make RQ move the job to a list of its own (LMOVE), which
                    # only a worker of that one queue clears: the same key twice is a BLPOP.
                    others if len(others) > 1 else others * 2,
                    max(1, math.ceil(min(wait, PAUSE_BEAT_SECONDS))),  # BLPOP: whole seconds
                    connection=self.connection,
                    job_class=self.job_class,
                    serializer=self.serializer,
                    death_penalty_class=self.death_penalty_class,
                )
            except DequeueTimeout:
                continue
            except RedisConnectionError:
                break  # RQ's own loop waits for Redis
            if result is not None:
                self.reorder_queues(reference_queue=result[1])
                return result
        return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)

    def _resting_lanes(self) -> dict[str, float]:
        """Lane -> seconds it still rests, for the lanes this worker leaves alone."""
        now = time.monotonic()
        self._resting = {lane: end for lane, end in self._resting.items() if end > now}
        return {lane: end - now for lane, end in self._resting.items()}

    def execute_job(self, job, queue):
        if not isinstance(self, SimpleWorker):
            # Weighing the job opened this process's connection: a forked work horse must
            # open its own, not share the socket.
            connections.close_all()
        try:
            return super().execute_job(job, queue)
        finally:
            self._share.release()

    def _paused_stages(self) -> dict[str, float]:
        """Stage -> seconds its jobs still wait, for the stages whose provider is paused.
        While every provider is well, as far as this worker has seen, Redis is asked at
        most every PAUSE_LOOK_SECONDS, not before each job: a pause another worker opens
        meanwhile costs this one at most the jobs it takes in that moment."""
        failing = any(provider.failing for provider in self._providers.values())
        now = time.monotonic()
        if not failing and now - self._looked_at < PAUSE_LOOK_SECONDS:
            return {}
        paused = {}
        for stage, provider in self._providers.items():
            if (wait := provider.paused_for()) > 0:
                paused[stage] = wait
        self._looked_at = now
        return paused

    def reorder_queues(self, reference_queue: Queue) -> None:
        # RQ calls this after each job it took, with the queue the job came from.
        lane = queue_lane(reference_queue.name)
        if lane is not None:
            names = [queue.name for queue in self._lanes[lane.priority]]
            if reference_queue.name in names:
                self._next[lane.priority] = (names.index(reference_queue.name) + 1) % len(names)
        self.picks += 1
        self._ordered_queues = self.lane_order()


class LaneWorker(PromptStop, LaneOrder, SimpleWorker):
    """Runs stages in the worker process, taking lanes in turn (the default)."""


class ForkingLaneWorker(PromptStop, LaneOrder, Worker):
    """Forks a work horse per job, taking lanes in turn."""


def lane_worker_class(base: type[Worker]) -> type[Worker]:
    """`base` with lanes taken in turn and a prompt stop (itself if it already has them)."""
    missing = tuple(mixin for mixin in (PromptStop, LaneOrder) if not issubclass(base, mixin))
    if not missing:
        return base
    return type(f"Lane{base.__name__}", (*missing, base), {})


class QueueWorker(PromptStop, SimpleWorker):
    """Runs the jobs of plain queues in the worker process, with a prompt stop: the webhook
    deliveries' (webhooks/dispatch.py)."""
