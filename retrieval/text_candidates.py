"""What a text backend (retrieval/text_postgresql.py, retrieval/text_sqlite.py) finds
for a query: its matching chunks with a text score, and which of the query's clauses
each matching document holds, over all its chunks."""

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TextMatch:
    chunk_id: object
    document_id: object
    index: int
    # BM25-like: the sum over the clauses the chunk holds of their weight (rarer: more)
    # times a saturating function of how often it holds them; double for the words side
    # by side in the order typed.
    score: float
    clauses: frozenset[int]


@dataclass
class TextCandidates:
    # Best first by score.
    matches: list[TextMatch]
    # The clauses (their positions in the query) each document holds in any chunk.
    holds: dict[object, frozenset[int]] = field(default_factory=dict)
    # The query's clauses an index can look for (a clause of stop words alone cannot).
    clauses: int = 0


def idf(total: int, found: int) -> float:
    """BM25's weight of a word found in `found` of `total` chunks: rarer words weigh more."""
    total = max(total, found)
    return math.log(1 + (total - found + 0.5) / (found + 0.5))
