"""Line charts as inline SVG, in a self-contained HTML page (or a bare SVG file): no
script, no CDN, no dependency.

`chart_page` draws panels that share the time axis; each panel has one or two
series (a second one on its own right-hand axis), and every panel shows the
same events: shaded spans (an outage) and vertical marks (a kill, a flush).
"""

import math
from dataclasses import dataclass, field
from html import escape

WIDTH, PANEL_HEIGHT = 960, 220
LEFT, RIGHT, TOP, BOTTOM = 64, 64, 28, 30
COLOURS = ("#1f6feb", "#d9480f", "#2b8a3e", "#862e9c")


@dataclass
class Series:
    label: str
    points: list[tuple[float, float]]
    colour: str = ""


@dataclass
class Panel:
    title: str
    left: Series
    right: Series | None = None


@dataclass
class Marks:
    spans: list[tuple[float, float, str]] = field(default_factory=list)  # start, end, label
    lines: list[tuple[float, str, str]] = field(default_factory=list)  # t, label, colour
    # Frequent events (a kill every few seconds) as short ticks above the plot.
    ticks: list[tuple[float, str, str]] = field(default_factory=list)  # t, label, colour


def _nice_max(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 x 10^k at or above value (1 when value <= 0)."""
    if value <= 0:
        return 1.0
    scale = 10.0 ** math.floor(math.log10(value))
    return next(step * scale for step in (1, 2, 2.5, 5, 10) if value <= step * scale * 1.000001)


def _divisions(top: float) -> int:
    """Grid lines that fall on round numbers: 5 for a top of 2.5 or 5 (x 10^k), else 4."""
    leading = top / 10.0 ** math.floor(math.log10(top))
    return 5 if round(leading, 3) in (2.5, 5.0) else 4


def _fmt(value: float) -> str:
    return f"{value:.0f}" if value == int(value) else f"{value:g}"


def _polyline(series: Series, x, y, colour: str) -> str:
    if not series.points:
        return ""
    coords = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in series.points)
    return f'<polyline fill="none" stroke="{colour}" stroke-width="1.6" points="{coords}"/>'


def _panel(panel: Panel, t_max: float, marks: Marks, offset: float) -> str:
    plot_w, plot_h = WIDTH - LEFT - RIGHT, PANEL_HEIGHT - TOP - BOTTOM

    def x(t: float) -> float:
        return LEFT + plot_w * (t / t_max if t_max else 0)

    def scaled(series: Series | None):
        top = _nice_max(max((v for _, v in series.points), default=0) if series else 0)
        return top, lambda v: offset + TOP + plot_h * (1 - v / top)

    left_top, y_left = scaled(panel.left)
    parts = [
        f'<text x="{LEFT}" y="{offset + 18}" font-size="13" font-weight="bold">'
        f"{escape(panel.title)}</text>",
        f'<rect x="{LEFT}" y="{offset + TOP}" width="{plot_w}" height="{plot_h}" '
        'fill="none" stroke="#999"/>',
    ]
    for start, end, label in marks.spans:
        parts.append(
            f'<rect x="{x(start):.1f}" y="{offset + TOP}" width="{max(x(end) - x(start), 1):.1f}" '
            f'height="{plot_h}" fill="#f59f00" opacity="0.18"><title>{escape(label)}</title></rect>'
        )
    for t, label, colour in marks.lines:
        parts.append(
            f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{offset + TOP}" '
            f'y2="{offset + TOP + plot_h}" stroke="{colour}" stroke-width="1" opacity="0.6">'
            f"<title>{escape(label)}</title></line>"
        )
    for t, label, colour in marks.ticks:
        parts.append(
            f'<line x1="{x(t):.1f}" x2="{x(t):.1f}" y1="{offset + TOP - 7}" y2="{offset + TOP}" '
            f'stroke="{colour}" stroke-width="1.2"><title>{escape(label)}</title></line>'
        )
    for i in range(_divisions(left_top) + 1):
        value = left_top * i / _divisions(left_top)
        parts.append(
            f'<text x="{LEFT - 6}" y="{y_left(value) + 4:.1f}" font-size="11" '
            f'text-anchor="end">{_fmt(value)}</text>'
        )
    legend = [(panel.left, panel.left.colour or COLOURS[0])]
    parts.append(_polyline(panel.left, x, y_left, legend[0][1]))
    if panel.right is not None:
        right_top, y_right = scaled(panel.right)
        colour = panel.right.colour or COLOURS[1]
        legend.append((panel.right, colour))
        parts.append(_polyline(panel.right, x, y_right, colour))
        for i in range(_divisions(right_top) + 1):
            value = right_top * i / _divisions(right_top)
            parts.append(
                f'<text x="{WIDTH - RIGHT + 6}" y="{y_right(value) + 4:.1f}" font-size="11" '
                f'fill="{colour}">{_fmt(value)}</text>'
            )
    at = LEFT + 260
    for series, colour in legend:
        parts.append(
            f'<rect x="{at}" y="{offset + 9}" width="14" height="3" fill="{colour}"/>'
            f'<text x="{at + 18}" y="{offset + 14}" font-size="12">{escape(series.label)}</text>'
        )
        at += 24 + 7 * len(series.label)
    step = _nice_max(t_max / 6)
    for i in range(int(t_max / step) + 1):
        t = step * i
        parts.append(
            f'<text x="{x(t):.1f}" y="{offset + PANEL_HEIGHT - 10}" font-size="11" '
            f'text-anchor="middle">{_fmt(t)} s</text>'
        )
    return "\n".join(parts)


def chart_svg(panels: list[Panel], marks: Marks) -> str:
    """The panels as one standalone SVG document (a README can show it as an image)."""
    t_max = max(
        (t for panel in panels for s in (panel.left, panel.right) if s for t, _ in s.points),
        default=1.0,
    )
    height = PANEL_HEIGHT * len(panels)
    body = "\n".join(
        _panel(panel, t_max, marks, i * PANEL_HEIGHT) for i, panel in enumerate(panels)
    )
    return f"""<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}"
 viewBox="0 0 {WIDTH} {height}" font-family="system-ui,sans-serif">
<rect width="100%" height="100%" fill="white"/>
{body}
</svg>
"""


def chart_page(title: str, panels: list[Panel], marks: Marks, notes: list[str]) -> str:
    """The whole HTML document: the SVG inline, then the notes."""
    items = "\n".join(f"<li>{escape(note)}</li>" for note in notes)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<style>body{{font-family:system-ui,sans-serif;margin:24px;color:#222}}
li{{margin:2px 0;font-size:13px}}</style></head>
<body><h1 style="font-size:18px">{escape(title)}</h1>
{chart_svg(panels, marks)}<ul>
{items}
</ul>
</body></html>
"""
