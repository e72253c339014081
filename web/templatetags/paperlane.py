"""Filters of the member pages: a run in a few words, and what may be done with it; the
pages a chunk comes from; a connected folder's sync result."""

from django import template

from connectors.models import Connection
from web import runs
from web.search_results import pages_label

register = template.Library()

register.filter("summary", runs.run_summary)
register.filter("status_label", runs.status_label)
register.filter("active", runs.is_active)
register.filter("retry_offered", runs.retry_offered)
register.filter("file_fault", runs.file_fault)
register.filter("advice", runs.run_advice)
register.filter("timeline", runs.run_timeline)
register.filter("source_words", runs.source_words)
register.filter("connector_file", runs.connector_file)


@register.filter
def chunk_pages(chunk) -> str:
    """ "p. 3" or "p. 3–4": the pages the chunk's text comes from ("" without pages)."""
    return pages_label(chunk.page_start, chunk.page_end)


@register.filter
def sync_result(value: str) -> str:
    """A sync's result as people read it ("OK", "Provider busy"); "running" until it has one."""
    if not value:
        return "running"
    try:
        return Connection.Result(value).label
    except ValueError:
        return value


@register.filter
def ocr_confidence(pages: list[dict]) -> str:
    """The mean confidence of the pages OCR read, as a percentage ("93%")."""
    if not pages:
        return ""
    return f"{round(100 * sum(page['confidence'] for page in pages) / len(pages))}%"
