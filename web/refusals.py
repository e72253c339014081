"""Why a file was refused, in words for the person who chose it: what is wrong and, where
there is something to do, what."""

from django.template.defaultfilters import filesizeformat

from core.errors import FileTooLarge, ServiceError


def refusal_words(exc: ServiceError, *, name: str | None, size: int | None = None) -> str:
    """The refusal of the file `name` (of `size` bytes, if known) as one plain sentence or
    two; without a name, the refusal's own words."""
    if isinstance(exc, FileTooLarge):
        limit = exc.extra.get("max_bytes")
        most = f" One file may be at most {filesizeformat(limit)}." if limit else ""
        which = f"“{name}”" if name else "The file"
        measured = f" ({filesizeformat(size)})" if size else ""
        return f"{which} is too large{measured}.{most}"
    if exc.code == "missing_file":  # the form (or the page's script) sent no file
        return "Choose a PDF, Word (.docx), PNG, JPEG or TIFF file to upload."
    if name is None:
        return exc.message
    return f"“{name}”: {exc.message}"
