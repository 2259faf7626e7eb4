"""Exact scoring of scanned vectors against a query, a batch at a time (numpy): ``Ranking``.

Scores are LangGraph's: ``cosine`` (the default) is the cosine similarity (0 for a
zero vector, as ``InMemoryStore``), ``inner_product`` the dot product, ``l2`` the
negated Euclidean distance (as ``PostgresStore``): higher is closer for all three.
A record with several vectors scores its best one (max pooling, as LangGraph's
stores). ``Ranking`` keeps the best ``keep`` records seen so far, so memory holds one
batch and the kept records whatever the number scanned; ties keep the order the
records were fed in (key order).

numpy comes with the ``langgraph`` extra (pyproject.toml); this module is imported
only by a search that has a query.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from flowmem.store.vectors import Nearest
from flowmem.store.vectors.cache import Snapshot

DISTANCES = ("cosine", "inner_product", "l2")
CHUNK_BYTES = 2**20  # vectors scored together: small enough to stay in the CPU's cache


def as_query(values: Sequence[float]) -> Any:
    """A query embedding as a float32 array."""
    return np.asarray(values, dtype=np.float32)


def score(query: Any, blobs: Sequence[bytes], distance: str) -> Any:
    """The score of each float32 vector in ``blobs`` against ``query`` (float64 array).

    float32 arithmetic (numpy's BLAS for the dot products): the scores agree with a
    float64 computation to about 1e-6.
    """
    matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(blobs), query.shape[0])
    return score_matrix(query, matrix, distance)


def squares_of(matrix: Any) -> Any:
    """Each row's squared norm (float32 arithmetic, as float64)."""
    return np.einsum("ij,ij->i", matrix, matrix).astype(np.float64)


def score_matrix(query: Any, matrix: Any, distance: str, squares: Any = None) -> Any:
    """``score`` of the rows of a float32 ``matrix``; ``squares``: their squared norms, when known."""
    dots = (matrix @ query).astype(np.float64)
    if distance == "inner_product":
        return dots
    if squares is None:
        squares = squares_of(matrix)
    qsquare = float(np.dot(query, query))
    if distance == "l2":  # |m - q| from |m|^2 - 2 m.q + |q|^2, without a copy of the matrix
        return -np.sqrt(np.maximum(squares - 2 * dots + qsquare, 0.0))
    norms = np.sqrt(squares)
    out = np.zeros(len(dots), dtype=np.float64)
    mask = norms != 0
    if qsquare:
        out[mask] = dots[mask] / (norms[mask] * np.sqrt(qsquare))
    return out


class Ranking:
    """The best ``keep`` records of the rows fed, by score (max over a record's rows), ties in feed order."""

    def __init__(self, query: Sequence[float], distance: str, keep: int) -> None:
        self.query = as_query(query)
        self.distance = distance
        self.keep = keep
        self.fed = 0  # records scored
        self._scores = np.zeros(0, dtype=np.float64)
        self._order = np.zeros(0, dtype=np.int64)
        self._keys: list[str] = []
        self._texts: list[str | None] = []

    def feed(
        self, keys: Sequence[str], blobs: Sequence[bytes], texts: Sequence[str | None] | None = None
    ) -> None:
        """Score rows of whole records (a record's rows together, never split across calls).

        ``texts``: each row's record value, kept with the records kept.
        """
        if not keys:
            return
        # a chunk at a time: its copy, dot products and norms stay in the CPU's cache
        step = max(1, CHUNK_BYTES // (4 * self.query.shape[0]))
        parts = [score(self.query, blobs[i : i + step], self.distance) for i in range(0, len(blobs), step)]
        scores = parts[0] if len(parts) == 1 else np.concatenate(parts)
        starts = [0] + [i for i in range(1, len(keys)) if keys[i] != keys[i - 1]]
        pooled = np.maximum.reduceat(scores, starts)
        order = np.arange(self.fed, self.fed + len(starts), dtype=np.int64)
        self.fed += len(starts)
        self._scores = np.concatenate([self._scores, pooled])
        self._order = np.concatenate([self._order, order])
        self._keys.extend(keys[i] for i in starts)
        self._texts.extend(texts[i] if texts is not None else None for i in starts)
        if len(self._keys) > 2 * self.keep + 1024:
            self._prune()

    def _prune(self) -> None:
        best = np.lexsort((self._order, -self._scores))[: self.keep]
        best.sort()  # back in feed order
        self._scores, self._order = self._scores[best], self._order[best]
        self._keys = [self._keys[i] for i in best]
        self._texts = [self._texts[i] for i in best]

    def best(self) -> list[tuple[str, float, str | None]]:
        """The kept records, best first: (key, score, value text when fed)."""
        ranked = np.lexsort((self._order, -self._scores))[: self.keep]
        return [(self._keys[i], float(self._scores[i]), self._texts[i]) for i in ranked]


def rank_snapshot(snapshot: Snapshot, ask: Nearest, now: float) -> tuple[list[tuple[str, float, str | None]], int]:
    """A snapshot's best ``ask.keep`` records live at ``now`` (and accepted), as ``Ranking.best``, and how many.

    The same scores as the scan's (a record's best vector), ties in key order; the
    pages' rows are read in place (no copy), their squared norms made once per snapshot.
    """
    distance, keep, accept = ask.distance, ask.keep, ask.accept
    if not snapshot.keys or keep <= 0:
        return [], 0
    vector = as_query(ask.query)
    memo = snapshot.memo
    if "starts" not in memo:
        memo["starts"] = np.asarray(snapshot.starts, dtype=np.int64)
        memo["expires"] = np.asarray([np.inf if e is None else e for e in snapshot.expires], dtype=np.float64)
        memo["matrices"] = [np.frombuffer(b, dtype="<f4").reshape(-1, snapshot.dims) for b in snapshot.blocks if b]
    if distance != "inner_product" and "squares" not in memo:
        step = max(1, CHUNK_BYTES // (4 * snapshot.dims))
        memo["squares"] = [
            np.concatenate([squares_of(m[i : i + step]) for i in range(0, len(m), step)]) for m in memo["matrices"]
        ]
    squares = memo.get("squares") or [None] * len(memo["matrices"])
    parts = [score_matrix(vector, m, distance, q) for m, q in zip(memo["matrices"], squares, strict=True)]
    scores = parts[0] if len(parts) == 1 else np.concatenate(parts)
    pooled = np.maximum.reduceat(scores, memo["starts"])
    live = memo["expires"] > now
    if accept is not None:
        texts, keys = snapshot.texts, snapshot.keys
        for i in np.flatnonzero(live).tolist():
            live[i] = accept(keys[i], texts[i])
    chosen = np.flatnonzero(live)
    values = pooled[chosen]
    if len(chosen) > keep:  # every record scoring at least the keep-th best: ties at the edge too
        edge = np.partition(values, len(values) - keep)[len(values) - keep]
        close = values >= edge
        chosen, values = chosen[close], values[close]
    best = chosen[np.lexsort((chosen, -values))[:keep]]
    found = [(snapshot.keys[i], float(pooled[i]), snapshot.texts[i]) for i in best.tolist()]
    return found, int(live.sum())
