"""Known-item queries: for each document of a corpus, three queries built from its own
text, and how far down the answers the document is (MRR@10). Used by
tests/retrieval/test_known_items.py and bench/search.py.

The kinds, as a person who remembers a document types them:
- `phrase`: 6 consecutive words of it;
- `distinctive`: 3 of its words rare across the corpus, one re-inflected (a plural `s`
  added or removed);
- `with_absent`: the same and 1 word the document lacks (another document's).

The baseline is SQLite FTS5 (Python's sqlite3) with Porter's stemmer and bm25 over the
same chunks, any word of the query matching: what the issue measured search against.
"""

import collections
import re
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from documents.reading import extract_limits
from formats import extract
from retrieval.chunking import clean_text, split_chunks

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real_world"
KINDS = ("phrase", "distinctive", "with_absent")
# Words a person would type: letters only, not a number or a code.
_WORD = re.compile(r"[^\W\d_]{2,}")
_DEPTH = 10


@dataclass(frozen=True)
class KnownItem:
    key: str  # the document's name in the corpus
    kind: str
    query: str


def real_world_chunks() -> dict[str, list[str]]:
    """Each real-world fixture our extractors read, cut into chunks as the embed stage
    cuts it; files without text enough to query (scans, blank forms, encrypted) left out."""
    corpus = {}
    for path in sorted(FIXTURES.iterdir()):
        kind = {".pdf": "pdf", ".docx": "docx"}.get(path.suffix)
        if kind is None:
            continue
        try:
            text = extract(kind, path.read_bytes(), extract_limits()).text
        except Exception:  # unreadable or encrypted: nothing to find it by
            continue
        chunks = split_chunks(clean_text(text))
        if len(_WORD.findall(" ".join(chunks))) >= 12:
            corpus[path.name] = chunks
    return corpus


def known_items(corpus: dict[str, list[str]]) -> list[KnownItem]:
    """Three queries for each document (fewer where its text lacks the words)."""
    words = {
        key: [w.lower() for w in _WORD.findall(" ".join(chunks))] for key, chunks in corpus.items()
    }
    spread = collections.Counter(w for ws in words.values() for w in set(ws))
    keys = list(corpus)
    distinctive = {key: _distinctive(words[key], spread) for key in keys}
    items = []
    for n, key in enumerate(keys):
        phrase = _phrase(" ".join(corpus[key]))
        if phrase:
            items.append(KnownItem(key, "phrase", phrase))
        chosen = distinctive[key]
        if len(chosen) < 3:
            continue
        query = " ".join([_reinflect(chosen[0]), *chosen[1:3]])
        items.append(KnownItem(key, "distinctive", query))
        held = set(words[key])
        for other in keys[n + 1 :] + keys[:n]:
            absent = [w for w in distinctive[other] if w not in held]
            if absent:
                items.append(KnownItem(key, "with_absent", f"{query} {absent[0]}"))
                break
    return items


def _phrase(text: str) -> str:
    """6 consecutive words from a third of the way in: tokens that are words."""
    tokens = text.split()
    for start in range(len(tokens) // 3, len(tokens) - 6):
        window = [t.strip(".,;:()[]\"'!?") for t in tokens[start : start + 6]]
        if all(_WORD.fullmatch(t) for t in window):
            return " ".join(window)
    return ""


def _distinctive(words: list[str], spread: collections.Counter) -> list[str]:
    """The document's words in the fewest documents, the longer first among equals."""
    counts = collections.Counter(w for w in words if len(w) >= 4)
    return sorted(counts, key=lambda w: (spread[w], -counts[w], -len(w), w))[:3]


def _reinflect(word: str) -> str:
    return word[:-1] if word.endswith("s") and len(word) > 4 else word + "s"


def mrr(items: list[KnownItem], search: Callable[[str], list[str]]) -> dict[str, float]:
    """Mean reciprocal rank of each item's document in the first 10 `search` returns
    (document keys, best first), by kind."""
    scores = collections.defaultdict(list)
    for item in items:
        found = search(item.query)[:_DEPTH]
        scores[item.kind].append(1 / (found.index(item.key) + 1) if item.key in found else 0.0)
    return {kind: sum(v) / len(v) for kind, v in scores.items() if v}


class Fts5Baseline:
    """SQLite FTS5, Porter's stemmer, bm25, any word: a document ranks by its best chunk."""

    def __init__(self, corpus: dict[str, list[str]]) -> None:
        self.db = sqlite3.connect(":memory:")
        self.db.execute(
            "CREATE VIRTUAL TABLE chunks USING fts5(key UNINDEXED, text, tokenize='porter')"
        )
        self.db.executemany(
            "INSERT INTO chunks (key, text) VALUES (?, ?)",
            [(key, text) for key, chunks in corpus.items() for text in chunks],
        )

    def search(self, query: str) -> list[str]:
        terms = " OR ".join(f'"{w}"' for w in re.findall(r"\w+", query.lower()))
        rows = self.db.execute(
            "SELECT key FROM chunks WHERE chunks MATCH ? ORDER BY bm25(chunks)", [terms]
        )
        return list(dict.fromkeys(key for (key,) in rows))[:_DEPTH]
