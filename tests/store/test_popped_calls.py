"""A popped or cleared buffer's calls, on every back-end (memory, SQLite, PostgreSQL).

Once ``tests/store/test_memory.py``'s, when ``memory://`` was a Python engine that kept
a call index between appends; the rules hold on every store (decision 0138).
"""

from __future__ import annotations

from typing import Any

from flowmem.core import is_healed, prepare, result_id
from flowmem.store import Address, Store
from flowmem.store.base import SupportsPopLast

KEY = Address("user", "alice", "chat")


def _turn(i: int) -> list[dict[str, Any]]:
    call = {"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    return [
        {"role": "user", "content": f"question {i}"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{i}", "content": f"answer {i}"},
    ]


def test_mem_3_a_call_whose_answer_was_popped_is_healed_by_the_next_user_turn(store: Store) -> None:
    store.append(KEY, prepare(_turn(0), 1))
    assert isinstance(store, SupportsPopLast)
    popped = store.pop_last(KEY)
    assert popped is not None and popped["role"] == "tool"  # c0 is open again
    store.append(KEY, prepare([{"role": "user", "content": "next"}], 2))
    rows = store.load(KEY)
    assert [r["role"] for r in rows] == ["user", "assistant", "tool", "user"]
    assert result_id(rows[2]) == "c0" and is_healed(rows[2])


def test_mem_1_a_cleared_buffer_forgets_its_calls(store: Store) -> None:
    store.append(KEY, prepare(_turn(0), 1))
    assert store.clear(KEY) == 3
    outcome = store.append(KEY, prepare(_turn(0), 1))
    assert outcome.appended == 3  # not duplicates of what was cleared
