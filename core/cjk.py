"""Chinese, Japanese and Korean text for the search index: written without spaces between
words, a run of their characters is one token to PostgreSQL's text parser, so a part of
it ("世界" of "你好世界") would find nothing. Each run is read as its overlapping pairs of
characters ("你好 好世 世界"), at index and at query time alike (retrieval/query.py), as
search engines' CJK bigram analysers do: a part of two characters or more is found, as a
phrase of its pairs. Other scripts are left as they are. Pure functions, linear.
"""

import re

# Hiragana and katakana, CJK ideographs (extension A, unified, compatibility), Hangul
# syllables, half-width katakana.
RANGES = (
    ("\u3040", "\u30ff"),
    ("\u3400", "\u4dbf"),
    ("\u4e00", "\u9fff"),
    ("\uac00", "\ud7af"),
    ("\uf900", "\ufaff"),
    ("\uff66", "\uff9f"),
)
# One class, so a match never backtracks.
CHARACTER = re.compile("[" + "".join(f"{first}-{last}" for first, last in RANGES) + "]")
_RUN = re.compile(CHARACTER.pattern + "+")
# A word of any other script: a run of word characters that are not CJK.
OTHER_WORD = re.compile("[^\\W" + CHARACTER.pattern[1:-1] + "]+")
# The same class in PostgreSQL's regular expressions (its \\uXXXX escapes).
SQL_CLASS = "[" + "".join(f"\\u{ord(a):04x}-\\u{ord(b):04x}" for a, b in RANGES) + "]"


def bigrams(run: str) -> list[str]:
    """A run's overlapping pairs of characters; a run of one character is itself."""
    if len(run) < 2:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def with_bigrams(text: str) -> str | None:
    """`text` with each run of CJK characters written as its pairs, spaced apart from each
    other and from the text around; None when `text` has no such character."""
    if not CHARACTER.search(text):
        return None
    return _RUN.sub(lambda match: " " + " ".join(bigrams(match.group())) + " ", text)


def spans(text: str, terms: list[str]) -> list[tuple[int, int]]:
    """Where `text` holds those of `terms` written in CJK characters (a query's pairs), as
    (start, end) offsets, those that overlap or touch joined: the pairs of "你好世界"
    mark it whole. By plain find, no pattern over `text`."""
    found = []
    for term in dict.fromkeys(t for t in terms if CHARACTER.search(t)):
        at = text.find(term)
        while at >= 0:
            found.append((at, at + len(term)))
            at = text.find(term, at + 1)
    joined: list[tuple[int, int]] = []
    for start, end in sorted(found):
        if joined and start <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(end, joined[-1][1]))
        else:
            joined.append((start, end))
    return joined
