"""The burst's chart: points land where their values say, and nothing is fetched."""

import re

import pytest

from bench._chart import WIDTH, Marks, Panel, Series, _nice_max, chart_page, chart_svg


def _points(svg: str) -> list[list[tuple[float, float]]]:
    lines = re.findall(r'<polyline [^>]*points="([^"]+)"', svg)
    return [[tuple(map(float, p.split(","))) for p in line.split()] for line in lines]


def test_a_series_spans_the_plot_from_zero_to_its_largest_value():
    lag = Series("lag", [(0, 0), (5, 40), (10, 0)])
    queued = Series("queued", [(0, 0), (10, 300)])

    (lag_line, queued_line) = _points(chart_svg([Panel("Queue lag", lag, queued)], Marks()))

    # 40 rounds up to a top of 50; 300 to 500: each on its own axis.
    left, right, top, bottom = 64, WIDTH - 64, 28, 220 - 30
    assert lag_line[0] == (left, bottom)
    assert lag_line[1] == (pytest.approx((left + right) / 2), pytest.approx(bottom - 162 * 0.8))
    assert lag_line[2] == (right, bottom)
    assert queued_line[1] == (right, pytest.approx(bottom - (bottom - top) * 0.6))


def test_axis_tops_are_round_numbers():
    assert [_nice_max(v) for v in (0, 0.3, 1, 1.5, 3, 7, 11, 240, 260)] == [
        1, 0.5, 1, 2, 5, 10, 20, 250, 500,
    ]  # fmt: skip


def test_the_page_stands_alone_and_shows_the_events():
    marks = Marks(
        spans=[(2, 4, "outage")], lines=[(3, "flush", "#5f3dc4")], ticks=[(1, "kill", "red")]
    )
    page = chart_page("Burst <500>", [Panel("T", Series("s", [(0, 1), (6, 2)]))], marks, ["a & b"])

    assert "Burst &lt;500&gt;" in page and "a &amp; b" in page
    assert "<title>outage</title>" in page and "<title>kill</title>" in page
    assert re.findall(r'(?:src|href)="', page) == []
    assert "<script" not in page
