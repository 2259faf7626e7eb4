"""``ForwardingEditor``: a wrapper that overrides nothing leaves the append rules' result as it is."""

from __future__ import annotations

from typing import Any

from flowmem.core import ListEditor, apply_append
from flowmem.core.forwarding import ForwardingEditor

Row = dict[str, Any]


def _rows() -> list[Row]:
    calls = [{"tool_call_id": cid, "name": "search"} for cid in ("a", "b")]
    return [
        {"role": "user", "content": "hi", "metadata": {}},
        {"role": "assistant", "content": "", "metadata": {"tool_calls": calls}},
        {"role": "tool", "content": "result", "metadata": {"tool_call_id": "b"}},
        {"role": "user", "content": "again", "metadata": {}},
    ]


def test_mem_3_a_forwarding_editor_heals_and_windows_as_the_editor_it_wraps() -> None:
    plain = ListEditor([], evicted=["old"])
    wrapped = ListEditor([], evicted=["old"])
    assert apply_append(ForwardingEditor(wrapped), _rows(), max_messages=4) == apply_append(
        plain, _rows(), max_messages=4
    )
    assert wrapped.rows == plain.rows
    assert list(wrapped.evicted) == list(plain.evicted)
    assert any(row["metadata"].get("healed") for row in wrapped.rows)  # call "a" healed (MEM-3)


def test_each_question_is_the_wrapped_editor_s_answer() -> None:
    inner = ListEditor(_rows()[:3])
    editor = ForwardingEditor(inner)
    assert editor.count() == 3
    assert editor.is_declared("a") and not editor.is_declared("z")
    assert editor.answer_of("b") == inner.answer_of("b")
    assert editor.dangling() == inner.dangling()
    assert editor.oldest() == inner.oldest()
    assert editor.index_of(2) == 2
    editor.remember_evicted(["gone"])
    assert editor.was_evicted("gone")
    editor.replace(0, {"role": "user", "content": "changed", "metadata": {}})
    editor.delete(2)
    assert [row["content"] for row in inner.rows] == ["changed", ""]
