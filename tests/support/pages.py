"""Pages as people read them."""

import html
import re


def page_text(response) -> str:
    """The words a person reads on the page: tags dropped, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())
