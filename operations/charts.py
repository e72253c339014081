"""Geometry of the dashboard's two charts, drawn as inline SVG by the template.

Plain numbers in, coordinates out: no JavaScript, no chart library, nothing
fetched by the browser.
"""

import math
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from operations.stats.history import Minute
from pipeline.lag import LagSample

WIDTH, HEIGHT = 720, 180
LEFT, RIGHT, TOP, BOTTOM = 44, 8, 10, 22
# One colour per stage, in stage order (readable on the admin's light and dark themes).
STAGE_COLOURS = ("#2b7bb9", "#d97a00", "#3c9a4a", "#9a4fc4", "#c23b3b", "#6b7280")


@dataclass(frozen=True)
class Tick:
    position: float
    label: str


@dataclass(frozen=True)
class Bar:
    x: float
    width: float
    done_y: float
    done_height: float
    failed_y: float
    failed_height: float
    title: str


@dataclass(frozen=True)
class Series:
    name: str
    colour: str
    # Runs of consecutive samples as SVG "x,y x,y" point lists: a missing minute breaks the line.
    polylines: tuple[str, ...]
    # Single samples with no neighbour, drawn as dots.
    dots: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    plot_left: int
    plot_right: int
    plot_top: int
    plot_bottom: int
    y_ticks: tuple[Tick, ...]
    x_ticks: tuple[Tick, ...]
    bars: tuple[Bar, ...] = ()
    series: tuple[Series, ...] = ()
    # The y of a limit line (e.g. the lag allowed), if it is drawn.
    limit_y: float | None = None
    limit_label: str = ""


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 5 times a power of ten that is at least `value` (at least 1)."""
    if value <= 1:
        return 1
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return step * power
    return 10 * power


def _y(value: float, top: float) -> float:
    plot = HEIGHT - TOP - BOTTOM
    return round(HEIGHT - BOTTOM - plot * min(value, top) / top, 1)


def _y_ticks(top: float, unit: str = "") -> tuple[Tick, ...]:
    return tuple(Tick(_y(top * i / 4, top), f"{_number(top * i / 4)}{unit}") for i in range(5))


def _number(value: float) -> str:
    return f"{value:.0f}" if value == int(value) or value >= 10 else f"{value:.1f}"


def _x(index: int, count: int) -> float:
    slot = (WIDTH - LEFT - RIGHT) / count
    return round(LEFT + slot * index, 1)


def _x_ticks(starts: list[datetime]) -> tuple[Tick, ...]:
    # A label every 10 minutes of the site's time zone, at the minute's left edge.
    return tuple(
        Tick(_x(i, len(starts)), timezone.localtime(start).strftime("%H:%M"))
        for i, start in enumerate(starts)
        if timezone.localtime(start).minute % 10 == 0
    )


def _frame(y_ticks, x_ticks, **parts) -> Chart:
    return Chart(
        width=WIDTH,
        height=HEIGHT,
        plot_left=LEFT,
        plot_right=WIDTH - RIGHT,
        plot_top=TOP,
        plot_bottom=HEIGHT - BOTTOM,
        y_ticks=y_ticks,
        x_ticks=x_ticks,
        **parts,
    )


def throughput_chart(minutes: list[Minute]) -> Chart:
    """Stacked bars per minute: attempts that succeeded, and above them those that failed."""
    top = nice_ceiling(max((m.done + m.failed for m in minutes), default=0))
    slot = (WIDTH - LEFT - RIGHT) / max(len(minutes), 1)
    bars = []
    for i, minute in enumerate(minutes):
        done_y = _y(minute.done, top)
        failed_y = _y(minute.done + minute.failed, top)
        label = timezone.localtime(minute.start).strftime("%H:%M")
        bars.append(
            Bar(
                x=_x(i, len(minutes)) + 1,
                width=round(max(slot - 2, 1), 1),
                done_y=done_y,
                done_height=round(HEIGHT - BOTTOM - done_y, 1),
                failed_y=failed_y,
                failed_height=round(done_y - failed_y, 1),
                title=f"{label}: {minute.done} succeeded, {minute.failed} failed",
            )
        )
    return _frame(_y_ticks(top), _x_ticks([m.start for m in minutes]), bars=tuple(bars))


def _points(run: list[tuple[float, float]]) -> str:
    return " ".join(f"{x},{y}" for x, y in run)


def lag_chart(
    samples: list[LagSample], *, starts: list[datetime], stages: list[str], limit: float
) -> Chart:
    """One line per stage over the minutes `starts`, and the allowed lag as a dashed line."""
    by_minute = {sample.minute: sample for sample in samples}
    highest = max((lag or 0 for sample in samples for lag in sample.lags.values()), default=0)
    top = nice_ceiling(max(highest, limit) * 1.1)
    slot = (WIDTH - LEFT - RIGHT) / max(len(starts), 1)
    series = []
    for number, stage in enumerate(stages):
        runs, current = [], []
        for i, start in enumerate(starts):
            sample = by_minute.get(start)
            if sample is None:
                if current:
                    runs.append(current)
                current = []
                continue
            lag = sample.lags.get(stage) or 0
            current.append((round(_x(i, len(starts)) + slot / 2, 1), _y(lag, top)))
        if current:
            runs.append(current)
        series.append(
            Series(
                name=stage,
                colour=STAGE_COLOURS[number % len(STAGE_COLOURS)],
                polylines=tuple(_points(run) for run in runs if len(run) > 1),
                dots=tuple(run[0] for run in runs if len(run) == 1),
            )
        )
    return _frame(
        _y_ticks(top, " s"),
        _x_ticks(starts),
        series=tuple(series),
        limit_y=_y(limit, top),
        limit_label=f"limit {_number(limit)} s",
    )
