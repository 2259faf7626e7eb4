"""``MemoryStore`` keeps each buffer's call index between appends (an append is O(its rows)).

Before, every append deep-copied the whole buffer and indexed every row again:
3 ms per append at 1,000 rows, 22 ms at 8,000. The index an append leaves
(``IndexedListEditor.call_index``) seeds the next append's editor; every other
change of the rows drops it, so a stale index never answers (MEM-3 below).
"""

from __future__ import annotations

from typing import Any

import pytest

from flowmem.core import IndexedListEditor, is_healed, prepare, result_id
from flowmem.store import Address, MemoryStore

KEY = Address("user", "alice", "chat")


def _turn(i: int) -> list[dict[str, Any]]:
    call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return [
        {"role": "user", "content": f"question {i}"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"answer {i}"},
    ]


def test_an_append_to_a_long_buffer_indexes_only_its_own_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore()
    for i in range(300):
        store.append(KEY, prepare(_turn(i), 1))
    indexed: list[int] = []
    plain = IndexedListEditor._index

    def counting(self: IndexedListEditor, row: Any, step: int) -> None:
        indexed.append(step)
        plain(self, row, step)

    monkeypatch.setattr(IndexedListEditor, "_index", counting)
    outcome = store.append(KEY, prepare(_turn(300), 1))
    assert outcome.appended == 3 and store.count(KEY) == 903
    assert len(indexed) == 3  # the three new rows, not the 900 stored
    again = store.append(KEY, prepare(_turn(300), 1))  # a re-delivery of the call and its result
    assert (again.appended, again.deduplicated) == (1, 2)  # only the user turn is new (MEM-1, MEM-2)


def test_mem_3_a_call_whose_answer_was_popped_is_healed_by_the_next_user_turn() -> None:
    store = MemoryStore()
    store.append(KEY, prepare(_turn(0), 1))
    popped = store.pop_last(KEY)
    assert popped is not None and popped["role"] == "tool"  # c0 is open again
    store.append(KEY, prepare([{"role": "user", "content": "next"}], 2))
    rows = store.load(KEY)
    assert [r["role"] for r in rows] == ["user", "assistant", "tool", "user"]
    assert result_id(rows[2]) == "c0" and is_healed(rows[2])


def test_a_cleared_buffer_forgets_its_calls() -> None:
    store = MemoryStore()
    store.append(KEY, prepare(_turn(0), 1))
    assert store.clear(KEY) == 3
    outcome = store.append(KEY, prepare(_turn(0), 1))
    assert outcome.appended == 3  # not duplicates of what was cleared
