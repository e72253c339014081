"""Embedders whose geometry a test controls, for the vector index's tests.

`SynonymEmbedder` puts each group of synonyms on one axis of its own, so "car" and
"automobile" point the same way while sharing no word; every other word lands, by a
hash, on one of the remaining axes, as noise a real model's vectors also carry.
"""

import hashlib
import math

SYNONYMS = (
    ("car", "automobile", "motorcar", "vehicle"),
    ("invoice", "bill", "receipt"),
    ("holiday", "vacation", "leave"),
    ("physician", "doctor", "medic"),
)
_AXIS = {word: axis for axis, words in enumerate(SYNONYMS) for word in words}
# A synonym outweighs the handful of other words in a short chunk.
_SYNONYM_WEIGHT = 3.0


class SynonymEmbedder:
    dimensions = 16
    name = "synonyms-v1-16"

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for word in text.lower().split():
            word = word.strip(".,;:!?\"'()")
            if word in _AXIS:
                vector[_AXIS[word]] += _SYNONYM_WEIGHT
            elif word:
                digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
                others = self.dimensions - len(SYNONYMS)
                vector[len(SYNONYMS) + int.from_bytes(digest, "little") % others] += 1.0
        norm = math.sqrt(sum(x * x for x in vector))
        return [x / norm for x in vector] if norm else vector

    def embed(self, texts: list[str], *, max_seconds=None) -> list[list[float]]:
        return [self._vector(text) for text in texts]


class OtherSynonymEmbedder(SynonymEmbedder):
    """Another model of the same size: its vectors must never be compared with the first's."""

    name = "synonyms-v2-16"
