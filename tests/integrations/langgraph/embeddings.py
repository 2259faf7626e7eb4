"""A deterministic embedding for tests: character frequencies projected on seeded random directions.

The same idea as LangGraph's own test helper (``CharacterEmbeddings(dims, seed)``),
written here: texts that share characters embed close together, no model is needed,
and two instances with one seed embed alike.
"""

from __future__ import annotations

import math
import random
from collections import Counter

from langchain_core.embeddings import Embeddings


class CharacterEmbeddings(Embeddings):
    """Unit vectors of ``dims`` dimensions: a text's character frequencies times per-character directions."""

    def __init__(self, dims: int = 50, seed: int = 42) -> None:
        self.dims = dims
        self.seed = seed
        self._directions: dict[str, list[float]] = {}

    def _direction(self, char: str) -> list[float]:
        found = self._directions.get(char)
        if found is None:  # seeded by the character: the order of first use does not matter
            rng = random.Random(f"{self.seed}:{ord(char)}")
            found = [rng.gauss(0.0, 1.0) for _ in range(self.dims)]
            self._directions[char] = found
        return found

    def _embed(self, text: str) -> list[float]:
        counts = Counter(text)
        total = sum(counts.values())
        vector = [0.0] * self.dims
        for char, count in counts.items():
            for i, x in enumerate(self._direction(char)):
                vector[i] += count / total * x
        norm = math.sqrt(sum(x * x for x in vector))
        return [x / norm for x in vector] if norm else vector

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """One embedding per text."""
        return [self._embed(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        """The embedding of a query."""
        return self._embed(text)
