"""Filters that write the dashboard's numbers for people."""

from django import template

from operations.stats.base import seconds_text

register = template.Library()


@register.filter
def seconds(value) -> str:
    return seconds_text(value)


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
