"""Hypothesis strategies of a buffer's edits (appends, mid-turn inserts, replacements, deletions) for the editor's oracle tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st


def stored_rows(
    ids: st.SearchStrategy[Any], content: st.SearchStrategy[str]
) -> st.SearchStrategy[dict[str, Any]]:
    """A stored row: a user message, an assistant turn declaring 1–3 of ``ids``, or a (healed) result."""
    return st.one_of(
        st.builds(lambda c: {"role": "user", "content": c, "metadata": {}}, content),
        st.builds(
            lambda ids: {"role": "assistant", "content": "", "metadata": {"tool_calls": ids}},
            st.lists(st.builds(lambda cid: {"id": cid}, ids), min_size=1, max_size=3),
        ),
        st.builds(
            lambda cid, healed: {
                "role": "tool",
                "content": "r",
                "metadata": {"tool_call_id": cid, **({"healed": True} if healed else {})},
            },
            ids,
            st.booleans(),
        ),
    )


def edits(row: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    """1–25 edits of ``row``s: ``("append", row)``, ``("insert", at, rows)``, ``("replace", at, row)``, ``("delete", at)``."""
    return st.lists(
        st.one_of(
            st.tuples(st.just("append"), row),
            st.tuples(st.just("append"), row),
            st.tuples(st.just("insert"), st.integers(0, 50), st.lists(row, min_size=1, max_size=3)),
            st.tuples(st.just("replace"), st.integers(0, 50), row),
            st.tuples(st.just("delete"), st.integers(0, 50)),
        ),
        min_size=1,
        max_size=25,
    )


def apply_edit(op: tuple[Any, ...], editor: Any, reference: Any, where: list[int]) -> bool:
    """Apply one of ``edits``' edits to a stored ``editor`` (at its row positions ``where``) and to a ``ListEditor``; False if it needs a row and there is none."""
    if op[0] == "append":
        reference.append_row(op[1])
        editor.append_row(op[1])
        return True
    if not where:
        return False
    index = op[1] % len(where)
    if op[0] == "insert":
        reference.insert_after(index, op[2])
        editor.insert_after(where[index], op[2])
    elif op[0] == "replace":
        reference.replace(index, op[2])
        editor.replace(where[index], op[2])
    else:
        reference.delete(index)
        editor.delete(where[index])
    return True


def edit_like_the_list(
    ops: list[tuple[Any, ...]],
    editor: Any,
    reference: Any,
    positions: Callable[[], list[int]],
    faults: Callable[[], list[str]],
    fresh: Callable[[], Any],
) -> None:
    """Apply ``ops`` to a stored ``editor`` and a ``ListEditor``; after each, the layout has no fault and a fresh editor answers like the list."""
    for op in ops:
        if not apply_edit(op, editor, reference, positions()):
            continue
        editor.flush()
        assert faults() == []
        stored = fresh()  # only what is stored
        index_of = {pos: i for i, pos in enumerate(positions())}
        for cid in ["a", "b", "c", "d"]:
            assert stored.is_declared(cid) == reference.is_declared(cid)
            got, want = stored.answer_of(cid), reference.answer_of(cid)
            assert (got and (index_of[got.position], got.healed)) == (
                want and (want.position, want.healed)
            )
        assert [(d.call_id, index_of[d.after]) for d in stored.dangling()] == [
            (d.call_id, d.after) for d in reference.dangling()
        ]
