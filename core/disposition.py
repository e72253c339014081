"""How a file is offered for download under its own name: a Content-Disposition header."""

import os
import unicodedata
from urllib.parse import quote

# Printable ASCII that every client reads back as written in a quoted filename: not the
# quote and backslash (escapes some clients ignore) nor the percent sign (which some
# decode). A name of only these needs nothing more.
_PLAIN = frozenset(chr(c) for c in range(0x20, 0x7F)) - {'"', "\\", "%"}


def attachment(filename: str, *, fallback: str = "document") -> str:
    """`attachment` with `filename` (RFC 6266): as it is when it is plain ASCII; otherwise
    an ASCII approximation as `filename` for old clients and the exact name as
    `filename*` (RFC 5987, UTF-8, percent-encoded). Control characters and folder
    separators never reach the header."""
    name = "".join(c for c in filename if unicodedata.category(c)[0] != "C")
    # No folders, and no hidden file on the client's disk.
    name = name.replace("/", "_").replace("\\", "_").strip().lstrip(".") or fallback
    if set(name) <= _PLAIN:
        return f'attachment; filename="{name}"'
    stem, extension = os.path.splitext(name)
    plain = " ".join("".join(c if c in _PLAIN else "_" for c in _ascii(stem)).split())
    plain = (plain.strip("_") or fallback) + "".join(c for c in _ascii(extension) if c in _PLAIN)
    return f"attachment; filename=\"{plain}\"; filename*=UTF-8''{quote(name, safe='')}"


def _ascii(text: str) -> str:
    """Letters with accents as the letters alone ("é" as "e"); other non-ASCII dropped."""
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
