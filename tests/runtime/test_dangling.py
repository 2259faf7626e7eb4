"""``dangling_ids``: the runtime's one reader of unanswered calls (the loop and ``flowmem chat``)."""

from __future__ import annotations

from flowmem.runtime.loop import dangling_ids
from tests.test_scaling import assert_linear


def _turn(*ids: str) -> dict[str, object]:
    return {"role": "assistant", "content": "", "tool_calls": [{"id": i, "name": "f"} for i in ids]}


def test_mem_3_unanswered_calls_in_declaration_order_each_once() -> None:
    rows = [
        _turn("a", "b"),
        {"role": "tool", "content": "r", "tool_call_id": "a"},
        _turn("c", "b"),
    ]
    assert dangling_ids(rows) == ["b", "c"]


def test_dangling_ids_is_linear_in_the_calls() -> None:
    def run(n: int):  # type: ignore[no-untyped-def]
        rows = [_turn(*(f"c{i}" for i in range(n)))]
        return lambda: dangling_ids(rows)

    assert_linear("dangling_ids", run, 2000)
