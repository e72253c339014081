"""Free text from elsewhere (exception messages, tracebacks) made fit to store."""


def storable(text: str) -> str:
    """`text` as PostgreSQL can store it: a NUL, which a text column refuses, is written
    as `\\x00`, and a lone surrogate (which UTF-8 cannot encode) as `?`. Linear."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text
