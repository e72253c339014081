"""What a person typed into search, read the way web search engines read it: words,
"a quoted phrase", `a or b` (either), `-word` and `-"a phrase"` (not). Pure functions.

A query is a list of clauses; a clause is held by a text that holds any of its
alternatives (one, unless joined by `or`); an alternative is a word or a phrase.
Apostrophes and hyphens are normalised here exactly as the index normalises the
chunks' text (retrieval/search_index.py): "keeper's"
is "keepers", "state-of-the-art" is the phrase "state of the art", and "你好世界" is the
phrase of its pairs "你好 好世 世界" (core/cjk.py).
"""

import re
from dataclasses import dataclass

from core.cjk import with_bigrams
from retrieval.search_index import APOSTROPHES, HYPHENS

# Over the query only (at most MAX_QUERY_CHARS), never a document's text.
_WORD = re.compile(r"\w+")

_TABLE = str.maketrans(HYPHENS, " " * len(HYPHENS), APOSTROPHES)


def normalise(text: str) -> str:
    """`text` with apostrophes removed and hyphens read as spaces, as the index reads it."""
    return text.translate(_TABLE)


def indexed(text: str) -> str:
    """`text` as the index reads it: normalised, and runs of Chinese, Japanese or Korean
    characters as their pairs (a phrase of them)."""
    text = normalise(text)
    return with_bigrams(text) or text


Phrase = tuple[str, ...]


@dataclass(frozen=True)
class Query:
    # Each clause: its alternatives (phrases of lower-case words; a word is a phrase of one).
    clauses: tuple[tuple[Phrase, ...], ...]
    excluded: tuple[Phrase, ...]

    @property
    def words(self) -> list[str]:
        """The words to find, in order, each once: for snippets and marks."""
        seen = dict.fromkeys(w for clause in self.clauses for p in clause for w in p)
        return list(seen)


def parse(text: str) -> Query:
    """The query's clauses and excluded phrases. `or` between two terms joins them into
    one clause; `or` at either end, or after another `or`, is ignored."""
    clauses: list[list[Phrase]] = []
    excluded: list[Phrase] = []
    joining = False
    for negated, quoted, raw in _tokens(text):
        if not quoted and not negated and raw.lower() == "or":
            joining = bool(clauses)
            continue
        phrase = tuple(word.lower() for word in _WORD.findall(indexed(raw)))
        if not phrase:
            continue
        if negated:
            excluded.append(phrase)
        elif joining:
            clauses[-1].append(phrase)
        else:
            clauses.append([phrase])
        joining = False
    return Query(
        clauses=tuple(tuple(dict.fromkeys(clause)) for clause in clauses),
        excluded=tuple(dict.fromkeys(excluded)),
    )


def _tokens(text: str):
    """(negated, quoted, text) for each term: runs of non-space, or "quoted" runs."""
    position, length = 0, len(text)
    while position < length:
        while position < length and text[position].isspace():
            position += 1
        if position >= length:
            return
        negated = text[position] == "-"
        if negated:
            position += 1
        if position < length and text[position] == '"':
            end = text.find('"', position + 1)
            end = length if end < 0 else end
            yield negated, True, text[position + 1 : end]
            position = end + 1
            continue
        end = position
        while end < length and not text[end].isspace() and text[end] != '"':
            end += 1
        yield negated, False, text[position:end]
        position = end
