"""Lanes: which queue a stage job goes to.

Each stage has PAPERLANE_LANES queues per priority (pipeline/queues.py names
them). At enqueue, an organisation keeps its lane while that lane still holds
jobs, otherwise it moves to the shortest lane: one organisation's backfill
fills one lane while the others stay short. In which order a worker takes the
lanes is its class's (pipeline/rq_workers.py).

Lane choice races (two enqueues at once) only cost fairness, never a job: the
job goes to some lane of its stage, and every worker of the stage reads all.
"""

import random
from functools import cache

from redis import Redis
from redis.commands.core import Script

from pipeline.broker import queue_key
from pipeline.queues import priority_queue_names

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
    keys += [queue_key(name) for name in names]
    start = random.randrange(len(names))  # noqa: S311 - spreading load, not a secret
    lane = _chooser(connection)(keys=keys, args=[organisation_id or "-", start])
    return names[int(lane)]


@cache
def _chooser(connection: Redis) -> Script:
    # Sent once per connection as EVALSHA; Redis keeps the script.
    return connection.register_script(_CHOOSE)
