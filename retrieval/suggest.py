"""Did you mean: for the words of a query that the organisation's documents do not hold,
the nearest words they do hold (their vocabulary, `SearchWord`, kept by
documents/services/vocabulary.py), and the query with those in their places.

A word's neighbours are found by its spellings with one letter dropped: two words whose
spellings with one letter dropped meet are at most a letter changed, added, dropped, or
two letters swapped apart, or two such edits (one in each). The GIN index on
`paperlane_word_deletes(word)` finds them within the organisation's vocabulary alone,
in core PostgreSQL (no extension, so the demo's embedded server has it too). Of those,
the nearest by edit distance (two adjacent letters swapped count as one edit), then the
one in the most documents. Stop words are never suggested: they find nothing.
"""

import re

from django.conf import settings

from core.cjk import CHARACTER
from documents.models import SearchWord
from documents.services.vocabulary import MAX_LETTERS, MIN_LETTERS
from retrieval.search_index import check_language

# Of a word's neighbours, this many in the most documents are weighed.
_NEIGHBOURS = 100
# Over the query only (at most MAX_QUERY_CHARS), never a document's text.
_WORD = re.compile(r"\w+")


def edit_distance(a: str, b: str) -> int:
    """The fewest letters changed, added or dropped, or adjacent pairs swapped, that turn
    `a` into `b` (optimal string alignment)."""
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        current = [i] + [0] * len(b)
        for j, y in enumerate(b, start=1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y))
            if i > 1 and j > 1 and x == b[j - 2] and a[i - 2] == y:
                current[j] = min(current[j], previous2[j - 2] + 1)
        previous2, previous = previous, current
    return previous[-1]


def allowed_distance(word: str) -> int:
    """How far a suggestion may be from `word`: one edit in a short word, two in a longer."""
    return 1 if len(word) <= 5 else 2


def correctable(word: str) -> bool:
    return MIN_LETTERS <= len(word) <= MAX_LETTERS and word.isalpha() and not CHARACTER.search(word)


def nearest_words(cursor, *, organisation_id: int, words: list[str]) -> dict[str, str]:
    """For each of `words` the organisation's documents do not hold, the nearest word they
    do (within `allowed_distance`), where there is one."""
    words = sorted({word for word in words if correctable(word)})
    if not words:
        return {}
    language = check_language(settings.PAPERLANE_SEARCH_LANGUAGE)
    cursor.execute(
        f"""
        SELECT q.word, s.word, s.documents
        FROM unnest(%s::text[]) AS q(word)
        CROSS JOIN LATERAL (
            SELECT s.word, s.documents FROM {SearchWord._meta.db_table} s
            WHERE s.organisation_id = %s AND s.documents > 0
              AND (s.word = ANY(paperlane_word_deletes(q.word) || q.word)
                   OR paperlane_word_deletes(s.word)
                      && (paperlane_word_deletes(q.word) || q.word))
            ORDER BY s.documents DESC, s.word
            LIMIT %s) s
        WHERE numnode(plainto_tsquery(%s::regconfig, s.word)) > 0
        """,
        [words, organisation_id, _NEIGHBOURS, language],
    )
    best: dict[str, tuple[int, int, str]] = {}
    for word, neighbour, documents in cursor.fetchall():
        distance = edit_distance(word, neighbour)
        if distance <= allowed_distance(word):
            best[word] = min(
                best.get(word, (distance, -documents, neighbour)), (distance, -documents, neighbour)
            )
    return {word: found[2] for word, found in best.items() if found[0] > 0}


def rewritten(query: str, replacements: dict[str, str]) -> str:
    """`query` as typed, each word of `replacements` (lower case) replaced, in the case it
    was typed in (all capitals, a capital first, or as suggested)."""

    def replace(match: re.Match) -> str:
        typed = match.group()
        suggested = replacements.get(typed.lower())
        if suggested is None:
            return typed
        if len(typed) > 1 and typed.isupper():
            return suggested.upper()
        if typed[0].isupper():
            return suggested[0].upper() + suggested[1:]
        return suggested

    return _WORD.sub(replace, query)
