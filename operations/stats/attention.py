"""What needs an operator's attention, in words, from a snapshot."""

from dataclasses import dataclass

from django.conf import settings

from operations.stats.base import seconds_text
from operations.stats.snapshot import PipelineSnapshot


@dataclass(frozen=True)
class Attention:
    # "no_worker", "lag", "failures", "stuck", "suspended", "redis", "provider"
    kind: str
    stage: str | None
    message: str


def attention(snapshot: PipelineSnapshot) -> list[Attention]:
    """Each condition an operator should act on, most basic first."""
    found = []
    if not snapshot.redis_ok:
        found.append(
            Attention(
                "redis",
                None,
                "Redis does not answer: nothing can be delivered to the workers, and the "
                "queue and worker numbers below are unknown.",
            )
        )
    if snapshot.suspended:
        found.append(
            Attention(
                "suspended",
                None,
                "Workers are suspended (rq suspend): no stage starts until they are resumed "
                "(rq resume).",
            )
        )
    lag_limit = settings.PAPERLANE_ATTENTION_LAG_SECONDS
    rate_limit = settings.PAPERLANE_ATTENTION_FAILURE_RATE
    for stage in snapshot.stages:
        if stage.paused_seconds is not None:
            left = seconds_text(stage.paused_seconds)
            pause = (
                f"its workers take none of its jobs for another {left}, then try one"
                if stage.paused_seconds > 0
                else "its workers are trying one job to see whether it answers again"
            )
            found.append(
                Attention(
                    "provider",
                    stage.name,
                    f"{stage.name}: its provider keeps failing; {pause}. Its runs wait in "
                    f"their queues with their tries whole ({stage.due} waiting).",
                )
            )
        if stage.workers == 0:
            waiting = f"{stage.waiting} jobs wait" if stage.waiting else "nothing waits yet"
            found.append(
                Attention(
                    "no_worker",
                    stage.name,
                    f"No worker serves the {stage.name} queue ({waiting}): "
                    "start run_workers, or check why its workers died.",
                )
            )
        if stage.lag_seconds is not None and stage.lag_seconds > lag_limit:
            found.append(
                Attention(
                    "lag",
                    stage.name,
                    f"{stage.name}: the oldest waiting run has waited "
                    f"{seconds_text(stage.lag_seconds)}, longer than the "
                    f"{seconds_text(lag_limit)} allowed; {stage.due} runs are waiting.",
                )
            )
        share = stage.failure_share_15m
        if share is not None and share > rate_limit:
            finished = stage.done_15m + stage.failed_15m
            found.append(
                Attention(
                    "failures",
                    stage.name,
                    f"{stage.name}: {share:.0%} of attempts failed in the last 15 minutes "
                    f"({stage.failed_15m} of {finished}), above the {rate_limit:.0%} limit.",
                )
            )
    if snapshot.stuck_total:
        runs = "run has" if snapshot.stuck_total == 1 else "runs have"
        found.append(
            Attention(
                "stuck",
                None,
                f"{snapshot.stuck_total} {runs} made no progress for more than "
                f"{seconds_text(settings.PAPERLANE_STUCK_AFTER_SECONDS)} or lost their "
                "worker: see the stuck runs below.",
            )
        )
    return found
