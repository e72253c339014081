"""Filters that write the dashboard's numbers for people."""

from django import template

register = template.Library()


@register.filter
def seconds(value) -> str:
    """45 ms, 1.5 s, 42 s, 4 min 05 s, 2 min, 2 h 03 min; an en dash for no value."""
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


@register.filter
def rate(value) -> str:
    """Per-minute figures: one decimal, no trailing noise."""
    if value is None:
        return "–"
    return "0" if value == 0 else f"{value:.1f}"


@register.filter
def share(value) -> str:
    return "–" if value is None else f"{value:.0%}"


@register.filter
def dash(value) -> str:
    """Unknown (None, e.g. Redis did not answer) shown as an en dash, zero as 0."""
    return "–" if value is None else str(value)
