"""Hypothesis strategies of a buffer's edits (appends, mid-turn inserts, replacements, deletions) for the editor's oracle tests."""

from __future__ import annotations

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
