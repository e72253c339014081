"""Filters of the member pages: a run in a few words, and what may be done with it; the
pages a chunk comes from; a connected folder's sync result; a page's picture."""

from django import template
from django.urls import reverse
from django.utils.html import format_html

from connectors.models import Connection
from documents.pictures import PICTURE_SIZES, document_has_pictures
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


@register.simple_tag
def page_picture(document, number: int, size: str, alt: str = "") -> str:
    """The <img> of page `number`'s picture at `size` (documents.pictures), loaded as it
    is scrolled to, in its box (width and height) so that nothing moves when it comes;
    "" for a document without pictures (a DOCX, a PDF before its pages are counted). Its
    link names the version: a new file is a new picture, whatever a browser kept."""
    if not document_has_pictures(document):
        return ""
    width, height = PICTURE_SIZES[size].box
    url = reverse("web:page_picture", args=[document.id, number])
    return format_html(
        '<img class="picture picture-{}" src="{}?size={}&amp;v={}" width="{}" height="{}"'
        ' loading="lazy" alt="{}">',
        size,
        url,
        size,
        document.version,
        width,
        height,
        alt or f"Page {number}",
    )


@register.filter
def ocr_confidence(pages: list[dict]) -> str:
    """The mean confidence of the pages OCR read, as a percentage ("93%")."""
    if not pages:
        return ""
    return f"{round(100 * sum(page['confidence'] for page in pages) / len(pages))}%"
