"""What the stats modules share: which attempt outcomes count as what, durations, and how
a duration is written for people."""

from django.db.models import Aggregate, DurationField, ExpressionWrapper, F, FloatField

from pipeline.models import StageAttempt

Outcome = StageAttempt.Outcome

# A stage attempt that did not do its stage's work. Abandoned: its worker died.
FAILED_OUTCOMES = (
    Outcome.TRANSIENT_ERROR,
    Outcome.PERMANENT_ERROR,
    Outcome.TIMEOUT,
    Outcome.ABANDONED,
)
# Attempts whose duration says how long the stage took: an abandoned attempt
# lasted until the sweeper noticed, a skipped one did nothing.
TIMED_OUTCOMES = (
    Outcome.SUCCEEDED,
    Outcome.TRANSIENT_ERROR,
    Outcome.PERMANENT_ERROR,
    Outcome.TIMEOUT,
)


def attempt_duration() -> ExpressionWrapper:
    return ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())


class PercentileCont(Aggregate):
    """PostgreSQL's continuous percentile of `expression` (an ordered-set aggregate)."""

    function = "PERCENTILE_CONT"
    name = "PercentileCont"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"

    def __init__(self, expression, fraction: float, **extra):
        fraction = float(fraction)
        if not 0 <= fraction <= 1:
            raise ValueError("a percentile is a fraction between 0 and 1")
        output = extra.pop("output_field", FloatField())
        super().__init__(expression, fraction=repr(fraction), output_field=output, **extra)


def seconds_text(value: float | None) -> str:
    """A duration for people: 45 ms, 1.5 s, 42 s, 4 min 05 s, 2 min, 2 h 03 min; an en
    dash for no value."""
    if value is None or value == "":
        return "–"
    value = float(value)
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 10:
        return f"{value:.1f} s"
    whole = int(value)
    if whole < 120:
        return f"{whole} s"
    if whole < 7200:
        minutes, rest = divmod(whole, 60)
        return f"{minutes} min {rest:02d} s" if rest else f"{minutes} min"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"
