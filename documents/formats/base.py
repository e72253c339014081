"""What every format module gives and the rules they share (page limits)."""

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from core.errors import UnreadableDocument

# Called with (pages done, pages in all) while text is extracted.
OnPage = Callable[[int, int], None]


@dataclass(frozen=True)
class Inspection:
    """What the accept path learns from a file without extracting its text."""

    kind: str
    pages: int
    # True when `pages` is an estimate that extraction will correct.
    estimated: bool


@dataclass(frozen=True)
class Extracted:
    """The text of a whole document and its real page count."""

    text: str
    page_count: int


def check_page_count(pages: object, *, what: str = "document") -> int:
    """A usable page count within PAPERLANE_MAX_PAGES_PER_DOCUMENT, or UnreadableDocument."""
    if not isinstance(pages, int) or pages < 1:
        raise UnreadableDocument(
            f"The {what} has no readable pages; the file may be damaged.", code="no_pages"
        )
    limit = settings.PAPERLANE_MAX_PAGES_PER_DOCUMENT
    if pages > limit:
        raise UnreadableDocument(
            f"The document has {pages} pages; the most we accept is {limit}.", code="too_many_pages"
        )
    return pages
