"""Lanes: which queue a stage job goes to, and in which order a worker takes them.

Each stage has PAPERLANE_LANES queues per priority (pipeline/queues.py names
them). At enqueue, an organisation keeps its lane while that lane still holds
jobs, otherwise it moves to the shortest lane: one organisation's backfill
fills one lane while the others stay short. A worker reads every lane of its
stage with one BLPOP (RQ's `dequeue_any` over a fixed list of keys), so a new
job is taken the moment it is pushed; after each job it reorders that list:
its own priority's lanes first, rotated so the lane after the one just served
comes first (lanes take turns), the other priority's lanes after them (no
idle worker while there is work), and every PAPERLANE_BULK_EVERY-th pick an
interactive-first worker puts the bulk lanes first (bulk work never starves).
While the provider a stage calls keeps failing (core/provider_breaker.py), the worker takes
none of that stage's jobs until the pause ends.

Lane choice races (two enqueues at once) only cost fairness, never a job: the
job goes to some lane of its stage, and every worker of the stage reads all.
"""

import math
import random
import time
from functools import cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from redis import Redis
from redis.commands.core import Script
from redis.exceptions import ConnectionError as RedisConnectionError
from rq import Queue
from rq.exceptions import DequeueTimeout
from rq.worker import SimpleWorker, Worker, WorkerStatus

from core.provider_breaker import breaker
from pipeline.models import RunPriority
from pipeline.queues import PRIORITIES, priority_queue_names, queue_lane, queue_stage
from pipeline.stage_list import stage_spec
from pipeline.worker_stop import PromptStop

# Which lane an organisation's jobs of one stage and priority go to.
LANE_OF_ORGANISATION = "paperlane:lane:{queue}"

# KEYS: the organisation->lane hash, then the lanes' queue lists. ARGV: the
# organisation, and the lane to start from when comparing lengths (random, so
# equal lanes are shared out). One round trip, atomic: no two enqueues pick at once.
_CHOOSE = """
local lanes = #KEYS - 1
local kept = tonumber(redis.call('HGET', KEYS[1], ARGV[1]))
if kept and kept >= 0 and kept < lanes and redis.call('LLEN', KEYS[kept + 2]) > 0 then
    return kept
end
local best, shortest = 0, -1
for step = 0, lanes - 1 do
    local lane = (tonumber(ARGV[2]) + step) % lanes
    local length = redis.call('LLEN', KEYS[lane + 2])
    if shortest < 0 or length < shortest then
        best, shortest = lane, length
    end
end
redis.call('HSET', KEYS[1], ARGV[1], best)
return best
"""


def lane_choose(
    *, connection: Redis, stage: str, priority: str, organisation_id: str | None
) -> str:
    """The queue name the next job of `stage` for this organisation goes to."""
    names = priority_queue_names(stage, priority)
    if len(names) == 1:
        return names[0]
    keys = [LANE_OF_ORGANISATION.format(queue=f"{stage}.{priority}")]
    keys += [Queue.redis_queue_namespace_prefix + name for name in names]
    start = random.randrange(len(names))  # noqa: S311 - spreading load, not a secret
    lane = _chooser(connection)(keys=keys, args=[organisation_id or "-", start])
    return names[int(lane)]


@cache
def _chooser(connection: Redis) -> Script:
    # Sent once per connection as EVALSHA; Redis keeps the script.
    return connection.register_script(_CHOOSE)


# A worker waiting for a paused provider looks again (and beats) at least this often.
PAUSE_BEAT_SECONDS = 2.0


def bulk_every() -> int:
    every = settings.PAPERLANE_BULK_EVERY
    if not isinstance(every, int) or every < 1:
        raise ImproperlyConfigured(
            f"PAPERLANE_BULK_EVERY must be a whole number >= 1, not {every!r}"
        )
    return every


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
        self.bulk_every = bulk_every()
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
        for queue in self.queues:
            lane = queue_lane(queue.name)
            if lane and (provider := stage_spec(lane.stage).provider):
                self._providers[lane.stage] = breaker(provider)

    def first_priority(self) -> str:
        """The priority whose lanes the next pick looks at first."""
        if self.prefers == RunPriority.INTERACTIVE and self.picks % self.bulk_every == (
            self.bulk_every - 1
        ):
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
        # While a stage's provider keeps failing, its jobs wait in their queues: the
        # worker takes its other stages' jobs, or waits (beating) until the pause ends.
        while paused := self._paused_stages():
            self.set_state(WorkerStatus.IDLE)  # a stop request now ends the worker at once
            self.heartbeat()
            wait = min(paused.values())
            others = [q for q in self._ordered_queues if queue_stage(q.name) not in paused]
            if not others:
                self.procline(f"Paused while {', '.join(sorted(paused))} waits for its provider")
                time.sleep(min(wait, PAUSE_BEAT_SECONDS))
                continue
            try:
                result = self.queue_class.dequeue_any(
                    others,
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

    def _paused_stages(self) -> dict[str, float]:
        """Stage -> seconds its jobs still wait, for the stages whose provider is paused."""
        paused = {}
        for stage, provider in self._providers.items():
            if (wait := provider.paused_for()) > 0:
                paused[stage] = wait
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
