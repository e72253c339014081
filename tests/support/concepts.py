"""Vectors that carry meaning, made here: a provider a test or a benchmark runs on
loopback (`ConceptServer`, OpenAI's /v1/embeddings protocol) whose model knows sixteen
concepts. Each concept's words point along its own direction (with a little of every
other concept's, as a real model's unrelated texts are never quite orthogonal); any
other word lands, by a hash, on the remaining dimensions, as noise. So "doctor" finds a
text about a physician and a patient while sharing no word with it, and "xylophone"
or "zzzz qqqq" is near nothing.

With it, a labelled set (`DOCUMENTS`, `QUERIES`): a document per concept (and for half of
them a second that only touches on it), and queries
that share no word with their targets (single words, paraphrases of two, two concepts
at once) and nonsense that should find nothing.
"""

import hashlib
import math
import random
from dataclasses import dataclass

from tests.support.embedding_server import EmbeddingServer

DIMENSIONS = 64
MODEL = "concepts-v1"

# Per concept: the words its document is written with, then the words only queries use.
CONCEPTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "medicine": (
        ("physician", "patient", "clinic", "treatment"),
        ("doctor", "nurse", "hospital", "medic", "surgeon", "illness"),
    ),
    "vehicle": (
        ("automobile", "engine", "motorway", "driver"),
        ("car", "truck", "vehicle", "sedan", "tyres", "garage"),
    ),
    "law": (
        ("lawyer", "court", "judge", "lawsuit"),
        ("attorney", "counsel", "litigation", "verdict", "solicitor", "tribunal"),
    ),
    "ocean": (
        ("marine", "tide", "coast", "waves"),
        ("sea", "ocean", "beach", "shore", "saltwater", "seaside"),
    ),
    "money": (
        ("payment", "bank", "funds", "invoice"),
        ("cash", "money", "dollars", "finance", "banknotes", "wages"),
    ),
    "children": (
        ("pupils", "toddlers", "nursery", "parents"),
        ("kids", "children", "youngsters", "infants", "babies", "childcare"),
    ),
    "travel": (
        ("holiday", "flight", "hotel", "tourist"),
        ("vacation", "trip", "journey", "airport", "resort", "sightseeing"),
    ),
    "food": (
        ("meal", "kitchen", "recipe", "dinner"),
        ("food", "cooking", "cuisine", "lunch", "chef", "breakfast"),
    ),
    "weather": (
        ("rainfall", "forecast", "storm", "temperature"),
        ("weather", "rain", "climate", "thunder", "snowfall", "drizzle"),
    ),
    "music": (
        ("orchestra", "concert", "melody", "symphony"),
        ("music", "song", "musician", "band", "choir", "tune"),
    ),
    "computing": (
        ("software", "computer", "server", "database"),
        ("programming", "laptop", "code", "developer", "algorithm", "hardware"),
    ),
    "farming": (
        ("harvest", "crops", "tractor", "cattle"),
        ("farm", "farmer", "agriculture", "livestock", "barn", "fields"),
    ),
    "sport": (
        ("football", "stadium", "match", "athletes"),
        ("sport", "soccer", "game", "team", "tournament", "coach"),
    ),
    "housing": (
        ("apartment", "tenant", "landlord", "rent"),
        ("house", "home", "flat", "lease", "dwelling", "housing"),
    ),
    "education": (
        ("university", "lecture", "students", "exam"),
        ("school", "college", "teacher", "classroom", "degree", "course"),
    ),
    "energy": (
        ("electricity", "power", "solar", "grid"),
        ("energy", "turbine", "battery", "voltage", "renewable", "wind"),
    ),
}
STOP_WORDS = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to "
    "was were will with our their they we you your about after".split()
)
# A concept's words weigh this much more than any other word of a text.
CONCEPT_WEIGHT = 1.5
# How much of every other concept's direction a concept's own carries.
BLEED = 0.2


def _directions() -> dict[str, list[float]]:
    rng = random.Random(1729)
    names = list(CONCEPTS)
    directions = {}
    for axis, name in enumerate(names):
        vector = [0.0] * DIMENSIONS
        vector[axis] = 1.0
        for other in range(len(names)):
            if other != axis:
                vector[other] = BLEED * rng.random()
        norm = math.sqrt(sum(x * x for x in vector))
        directions[name] = [x / norm for x in vector]
    return directions


_DIRECTIONS = _directions()
_CONCEPT_OF = {
    word: name for name, (written, asked) in CONCEPTS.items() for word in (*written, *asked)
}
_NOISE_AXES = range(len(CONCEPTS), DIMENSIONS)


def _noise(word: str) -> list[tuple[int, float]]:
    """Three of the noise axes, with signs, from the word's hash."""
    digest = hashlib.blake2b(word.encode(), digest_size=12).digest()
    picks = []
    for n in range(3):
        value = int.from_bytes(digest[n * 4 : n * 4 + 4], "little")
        axis = _NOISE_AXES[value % len(_NOISE_AXES)]
        picks.append((axis, 1.0 if value >> 31 else -1.0))
    return picks


class ConceptEmbedder:
    """The concept model, in process: what ConceptServer answers with."""

    dimensions = DIMENSIONS
    name = f"{MODEL}-{DIMENSIONS}"
    has_meaning = True

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * DIMENSIONS
        for raw in text.lower().split():
            word = raw.strip(".,;:!?\"'()")
            if not word or word in STOP_WORDS:
                continue
            if word in _CONCEPT_OF:
                for axis, x in enumerate(_DIRECTIONS[_CONCEPT_OF[word]]):
                    vector[axis] += CONCEPT_WEIGHT * x
            else:
                for axis, sign in _noise(word):
                    vector[axis] += sign / math.sqrt(3)
        norm = math.sqrt(sum(x * x for x in vector))
        return [x / norm for x in vector] if norm else vector

    def embed(self, texts: list[str], *, max_seconds=None) -> list[list[float]]:
        return [self._vector(text) for text in texts]


class ConceptServer(EmbeddingServer):
    """A /v1/embeddings server on loopback answering with the concept model's vectors."""

    def __init__(self) -> None:
        super().__init__(dimensions=DIMENSIONS)
        self.embedder = ConceptEmbedder()


# Plain office prose around a concept's words: what a document says besides its subject.
_FILLER = (
    "The committee met on Tuesday to review the report for the coming quarter.",
    "Please send the signed copy to our office before the end of the month.",
    "A copy of this note has been filed with the records department.",
    "Questions about this summary may be sent to the secretary by letter.",
)


def _document_text(name: str, written: tuple[str, ...], n: int) -> str:
    a, b, c, d = written
    return (
        f"Notes on {a} and {b}. The {c} was discussed at length, together with the {d}. "
        f"{_FILLER[n % len(_FILLER)]} {_FILLER[(n + 1) % len(_FILLER)]} "
        f"Everyone agreed that the {b} and the {d} deserve a closer look next year."
    )


def _brief_text(written: tuple[str, ...], n: int) -> str:
    """A document mostly about something else that touches on the concept once."""
    a, _, c, _ = written
    return " ".join(
        [_FILLER[(n + k) % len(_FILLER)] for k in range(3)]
        + [f"It also touches on the {a} and the {c}."]
    )


# File name -> text: a document per concept, and for half of them a second, brief one,
# farther from the concept's words: a query should find both.
DOCUMENTS: dict[str, str] = {
    f"{name}.pdf": _document_text(name, written, n)
    for n, (name, (written, _)) in enumerate(CONCEPTS.items())
}
BRIEF = tuple(CONCEPTS)[::2]
DOCUMENTS.update(
    {f"{name}-brief.pdf": _brief_text(CONCEPTS[name][0], n) for n, name in enumerate(BRIEF)}
)


def _targets(name: str) -> frozenset[str]:
    return frozenset({f"{name}.pdf", *([f"{name}-brief.pdf"] if name in BRIEF else [])})


@dataclass(frozen=True)
class Labelled:
    query: str
    # The documents it should find (file names); none for nonsense.
    targets: frozenset[str]
    kind: str  # "synonym", "paraphrase", "two concepts", "nonsense"


NONSENSE = (
    "xylophone",
    "quantum chromodynamics",
    "zzzz qqqq",
    "glacier",
    "violin",
    "asteroid belt",
    "origami",
    "volcano eruption",
    "medieval castle",
    "zebra",
    "telescope lens",
    "kangaroo",
    "knitting pattern",
    "lighthouse keeper",
    "dinosaur fossil",
    "chess opening",
    "perfume bottle",
    "submarine",
    "qwrt zxvb",
    "blorf snark",
    "umbrella",
    "pyramid",
    "tattoo",
    "lemonade",
    "parachute",
    "jigsaw puzzle",
    "mushroom",
    "penguin colony",
    "sculpture",
    "hieroglyphs",
)


def _labelled() -> list[Labelled]:
    queries = []
    names = list(CONCEPTS)
    for name, (_, asked) in CONCEPTS.items():
        target = _targets(name)
        queries += [Labelled(word, target, "synonym") for word in asked[:5]]
        queries.append(Labelled(f"{asked[1]} {asked[5]}", target, "paraphrase"))
    for n in range(0, len(names), 2):
        first, second = names[n], names[n + 1]
        queries.append(
            Labelled(
                f"{CONCEPTS[first][1][0]} {CONCEPTS[second][1][0]}",
                _targets(first) | _targets(second),
                "two concepts",
            )
        )
    queries += [Labelled(text, frozenset(), "nonsense") for text in NONSENSE]
    return queries


QUERIES: tuple[Labelled, ...] = tuple(_labelled())
