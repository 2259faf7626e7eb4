"""``normalize``'s fast path is MEM-5 steps 1 to 3 exactly as the plain steps give them.

``fast.steps_1_to_3`` fuses steps 1 to 3 into one scan for speed (bench/store.py
--only normalization); ``_steps_1_to_3`` runs them one function each, as the rule
states them. On generated histories both must give the same rows (keys in the same
order) and the same drop count.
"""

from __future__ import annotations

import importlib
from typing import Any

from hypothesis import given

from tests.core.test_properties import HISTORY, PROPERTY_SETTINGS
from tests.core.test_properties_content import ANY_HISTORY

# ``flowmem.core.normalize`` is also the name of the function the package exports.
steps = importlib.import_module("flowmem.core.normalize")
fast = importlib.import_module("flowmem.core.fast")


def _same(history: list[Any]) -> None:
    fast_rows, fast_dropped = fast.steps_1_to_3(history)
    plain_rows, plain_dropped = steps._steps_1_to_3(history, keep_content=False)
    assert fast_dropped == plain_dropped
    assert [list(row.items()) for row in fast_rows] == [list(row.items()) for row in plain_rows]


@PROPERTY_SETTINGS
@given(HISTORY)
def test_mem_5_fast_steps_equal_the_plain_steps(history: list[Any]) -> None:
    _same(history)


@PROPERTY_SETTINGS
@given(ANY_HISTORY)
def test_mem_5_fast_steps_equal_the_plain_steps_on_parts_and_call_kinds(
    history: list[Any],
) -> None:
    _same(history)


def test_mem_5_fast_steps_equal_the_plain_steps_on_a_late_result_and_a_crash() -> None:
    history = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "a"}, {"id": "b"}]},
        {"role": "tool", "content": "b", "tool_call_id": "b"},
        {"role": "system", "content": "s"},
        {"role": "user", "content": "again"},
        {"role": "tool", "content": "late a", "tool_call_id": " a "},
        {"role": "assistant", "content": "", "tool_calls": [{"tool_call_id": "c"}]},
    ]
    rows, dropped = fast.steps_1_to_3(history)
    assert (rows, dropped) == steps._steps_1_to_3(history, keep_content=False)
    assert [row.get("tool_call_id") for row in rows] == [None, None, None, "b", "a", None, None, "c"]


def test_mem_5_fast_steps_drop_a_result_whose_id_is_blank_or_zero_as_the_plain_steps_do() -> None:
    """MEM-11: "", "0" and white space are no id: such a result is an orphan, even after a call."""
    history: list[Any] = [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "0"}, {"id": " "}, {"id": "k"}]},
        {"role": "tool", "content": "zero", "tool_call_id": "0"},
        {"role": "tool", "content": "blank", "tool_call_id": "  "},
        {"role": "tool", "content": "empty", "tool_call_id": ""},
        {"role": "tool", "content": "k", "tool_call_id": " k"},
    ]
    rows, dropped = fast.steps_1_to_3(history)
    assert (rows, dropped) == steps._steps_1_to_3(history, keep_content=False)
    assert dropped == 5
    assert [row.get("tool_call_id") for row in rows] == [None, "k"]
