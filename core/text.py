"""Text from elsewhere (exception messages, tracebacks, what a request or a provider
sends): made fit to store or to show on one line, and read as a number only when it is
written in ASCII digits."""

import unicodedata

# More digits than any id or size here has; int() of thousands of digits is slow, and
# past 4,300 it raises.
NUMBER_MAX_DIGITS = 18
_ASCII_DIGITS = frozenset("0123456789")
# Control and format characters, line and paragraph separators, lone surrogates.
UNPRINTABLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


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


def printable(text: str) -> str:
    """`text` with each character of UNPRINTABLE_CATEGORIES written as its escape
    ("\\x1b", "\\u202e", "\\x00"): one line, shown as it is named, and storable."""
    if all(unicodedata.category(c) not in UNPRINTABLE_CATEGORIES for c in text):
        return text
    return "".join(
        c.encode("unicode_escape").decode("ascii")
        if unicodedata.category(c) in UNPRINTABLE_CATEGORIES
        else c
        for c in text
    )


def ascii_number(text: str, *, max_digits: int = NUMBER_MAX_DIGITS) -> int | None:
    """The whole number `text` writes in the digits 0-9 alone, at most `max_digits` of
    them; None for anything else. Not `str.isdigit()`, which also takes "²" (that int()
    refuses) and "٣" (that int() reads as 3)."""
    if not 0 < len(text) <= max_digits or not set(text) <= _ASCII_DIGITS:
        return None
    return int(text)
