"""Kept copies equal what validating every text gives, and the paused collector is restored (decision 0155)."""

from __future__ import annotations

import gc
import json
import pickle
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from flowmem.integrations.copies import MAX_SEGMENTS, KeptCopies, unpickled


@dataclass
class Item:
    """An object validated from a JSON text."""

    name: str
    tags: list[str]


def _validate(texts: Sequence[str]) -> list[Item]:
    return [Item(**json.loads(text)) for text in texts]


def _texts(count: int, start: int = 0) -> list[tuple[str, str]]:
    return [
        (f"h#{i}", json.dumps({"name": f"n{i}", "tags": [str(i)]}))
        for i in range(start, start + count)
    ]


def test_a_read_again_copies_what_it_validated_and_validates_only_the_rest() -> None:
    calls: list[int] = []

    def counted(texts: Sequence[str]) -> list[Item]:
        calls.append(len(texts))
        return _validate(texts)

    copies = KeptCopies(counted)
    chosen = _texts(5)
    first = copies.objects(chosen)
    again = copies.objects(chosen)
    grown = copies.objects(chosen + _texts(3, 5))
    assert calls == [5, 3]
    assert first == again == _validate([t for _, t in chosen]) and first[0] is not again[0]
    assert grown == _validate([t for _, t in chosen + _texts(3, 5)])
    longer = chosen + _texts(3, 5)
    changed = [*longer[:6], ("h#6", json.dumps({"name": "other", "tags": []})), *longer[7:]]
    assert copies.objects(changed) == _validate([t for _, t in changed])
    assert (
        calls[-1] == 3
    )  # the segment holding the changed text validated again, the one before copied


def test_many_reads_merge_their_segments_and_stay_equal() -> None:
    copies = KeptCopies(_validate)
    chosen: list[tuple[str, str]] = []
    for turn in range(MAX_SEGMENTS + 3):
        chosen += _texts(2, 2 * turn)
        assert copies.objects(chosen) == _validate([t for _, t in chosen])


@pytest.mark.usefixtures("collector")
@pytest.mark.parametrize("enabled", [True, False])
def test_unpickled_is_pickle_loads_and_leaves_the_collector_as_it_was(enabled: bool) -> None:
    items = [Item(f"n{i}", [str(i)] * 3) for i in range(200)]
    blob = pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL)
    (gc.enable if enabled else gc.disable)()
    assert unpickled(blob) == pickle.loads(blob) == items
    assert gc.isenabled() is enabled
    with pytest.raises(pickle.UnpicklingError):
        unpickled(b"not a pickle")
    assert gc.isenabled() is enabled


@pytest.mark.usefixtures("collector")
def test_no_collection_starts_while_a_copy_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    gc.enable()
    started: list[str] = []
    seen_enabled: list[bool] = []

    def noted(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(phase)

    real_loads = pickle.loads

    def loads(blob: bytes) -> object:
        seen_enabled.append(gc.isenabled())
        return real_loads(blob)

    monkeypatch.setattr(pickle, "loads", loads)
    blob = pickle.dumps(
        [Item(f"n{i}", [str(i)]) for i in range(20_000)], protocol=pickle.HIGHEST_PROTOCOL
    )
    gc.collect()
    gc.callbacks.append(noted)
    try:
        unpickled(blob)
        during = len(started)
    finally:
        gc.callbacks.remove(noted)
    assert seen_enabled == [False] and during == 0 and gc.isenabled()
