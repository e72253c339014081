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

from redis import Redis

from pipeline.broker import lane_keep_or_shortest
from pipeline.queues import priority_queue_names

# Which lane an organisation's jobs of one stage and priority go to.
LANE_OF_ORGANISATION = "paperlane:lane:{queue}"

def lane_choose(
    *, connection: Redis, stage: str, priority: str, organisation_id: str | None
) -> str:
    """The queue name the next job of `stage` for this organisation goes to."""
    names = priority_queue_names(stage, priority)
    if len(names) == 1:
        return names[0]
    return lane_keep_or_shortest(
        connection=connection,
        lanes=names,
        holders=LANE_OF_ORGANISATION.format(queue=f"{stage}.{priority}"),
        holder=organisation_id or "-",
        # Equal lanes are shared out: the comparison starts at a lane chosen at random.
        start=random.randrange(len(names)),  # noqa: S311 - spreading load, not a secret
    )
