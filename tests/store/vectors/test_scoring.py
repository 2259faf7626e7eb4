"""``flowmem.store.vectors.scoring``: exact scores of float32 vectors, ranked with max pooling and stable ties."""

from __future__ import annotations

import math

import numpy as np
import pytest

from flowmem.store.vectors import Space, pack
from flowmem.store.vectors.scoring import Ranking, as_query, score

SPACE = Space("test", 8)


def _reference(query: list[float], vector: list[float], distance: str) -> float:
    dot = sum(a * b for a, b in zip(query, vector, strict=True))
    if distance == "inner_product":
        return dot
    if distance == "l2":
        return -math.sqrt(sum((a - b) ** 2 for a, b in zip(query, vector, strict=True)))
    norms = math.sqrt(sum(a * a for a in query)) * math.sqrt(sum(b * b for b in vector))
    return dot / norms if norms else 0.0


@pytest.mark.parametrize("distance", ["cosine", "inner_product", "l2"])
def test_scores_are_the_distance_as_langgraph_defines_it(distance: str) -> None:
    rng = np.random.default_rng(3)
    vectors = [rng.standard_normal(8).astype(np.float32).tolist() for _ in range(50)] + [[0.0] * 8]
    query = rng.standard_normal(8).astype(np.float32).tolist()
    got = score(as_query(query), [pack(v, SPACE) for v in vectors], distance)
    want = [_reference(query, v, distance) for v in vectors]
    assert got.tolist() == pytest.approx(want, abs=1e-5)


def test_a_record_scores_its_best_vector_and_ties_keep_the_order_fed() -> None:
    up, down, side = [1.0] + [0.0] * 7, [-1.0] + [0.0] * 7, [0.0, 1.0] + [0.0] * 6
    ranking = Ranking(up, "cosine", keep=3)
    ranking.feed(["a", "a", "b"], [pack(down, SPACE), pack(up, SPACE), pack(side, SPACE)], ["A", "A", "B"])
    ranking.feed(["c", "d"], [pack(side, SPACE), pack(up, SPACE)])
    assert [(key, round(value, 6), text) for key, value, text in ranking.best()] == [
        ("a", 1.0, "A"), ("d", 1.0, None), ("b", 0.0, "B"),
    ]
    assert ranking.fed == 4


def test_a_ranking_keeps_the_best_whatever_the_number_fed() -> None:
    rng = np.random.default_rng(5)
    query = rng.standard_normal(8).astype(np.float32).tolist()
    vectors = [rng.standard_normal(8).astype(np.float32).tolist() for _ in range(5000)]
    ranking = Ranking(query, "inner_product", keep=7)
    for start in range(0, 5000, 100):
        keys = [f"k{i:05d}" for i in range(start, start + 100)]
        ranking.feed(keys, [pack(v, SPACE) for v in vectors[start : start + 100]])
    want = sorted(range(5000), key=lambda i: -_reference(query, vectors[i], "inner_product"))[:7]
    assert [key for key, _, _ in ranking.best()] == [f"k{i:05d}" for i in want]
