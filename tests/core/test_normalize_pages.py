"""MEM-5 normalization in two passes over pages is ``normalize`` over the whole list (issue 38 §2, decision 0113).

Oracle: ``normalize(entries, keep_content=True)``. The paged form
(``core.normalize_pages``) reads the entries in pages of a few rows, twice, and
reads a late result again by its key when its turn's run closes.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from flowmem.core import normalize
from flowmem.core.normalize_pages import RepairPlan, RepairRows, normalized_in_pages
from tests.formats.test_fast import ANY_HISTORY


def _pages(entries: list[Any], size: int) -> list[list[Any]]:
    return [entries[at : at + size] for at in range(0, len(entries), size)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ANY_HISTORY, st.integers(1, 4), st.lists(st.integers(0, 12), max_size=3))
def test_mem_5_normalization_page_by_page_is_the_whole_lists(
    history: list[Any], size: int, systems: list[int]
) -> None:
    entries = copy.deepcopy(history)
    for n, place in enumerate(systems):
        entries.insert(min(place, len(entries)), {"role": "system", "content": f"rule {n}"})
    whole = normalize(copy.deepcopy(entries), keep_content=True)
    event("repaired" if whole.dropped or whole.messages != normalize(whole.messages, keep_content=True).messages
          else "as stored")
    rows, dropped = normalized_in_pages(_pages(copy.deepcopy(entries), size))
    assert rows == whole.messages
    assert dropped == whole.dropped


def test_mem_5_a_late_result_is_read_again_by_its_key_not_held() -> None:
    """The first pass keeps a late result's key; the second reads it when its turn's run closes."""
    call = {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "f", "args": {}}]}
    late = {"role": "tool", "tool_call_id": "c1", "content": "late"}
    entries = [call, *({"role": "user", "content": f"u{n}"} for n in range(50)), late]
    keyed = [(n, entry) for n, entry in enumerate(entries)]
    plan = RepairPlan()
    plan.feed(keyed)
    assert plan.late == {"c1": 51}
    fetched: list[Any] = []
    rows = RepairRows(plan, lambda key: fetched.append(key) or entries[key])  # type: ignore[func-returns-value,index]
    out = rows.of(keyed[:2]) + rows.of(keyed[2:]) + rows.end()
    assert fetched == [51]
    assert out == normalize(entries, keep_content=True).messages
    assert [row["role"] for row in out[:3]] == ["assistant", "tool", "user"]


def test_mem_5_an_orphan_and_an_unanswered_call_are_repaired_in_pages() -> None:
    entries: list[Any] = [
        {"role": "tool", "tool_call_id": "nobody", "content": "x"},
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "f", "args": {}}]},
        {"role": "system", "content": "late rule"},
        "not a row",
    ]
    rows, dropped = normalized_in_pages(_pages(entries, 1))
    whole = normalize(entries, keep_content=True)
    assert (rows, dropped) == (whole.messages, whole.dropped)
    assert dropped == 2 and rows[0]["role"] == "system" and rows[-1]["role"] == "tool"
