"""The carried declarations' cases written once for both SQL back-ends (SQLite 28, PostgreSQL 34; decisions 0180, 0190)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from flowmem.core import compaction, prepare, result_id
from flowmem.store import Address


def call(*ids: str) -> dict[str, Any]:
    """An assistant turn calling a function once per id, as a caller appends it."""
    calls = [
        {"id": cid, "type": "function", "function": {"name": "f", "arguments": "{}"}} for cid in ids
    ]
    return {"role": "assistant", "content": "", "tool_calls": calls}


def result(cid: str, content: str = "r") -> dict[str, Any]:
    """A tool result answering ``cid``, as a caller appends it."""
    return {"role": "tool", "content": content, "tool_call_id": cid}


def appended_messages(ids: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, Any]]:
    """A message as a caller appends it: a user turn, a call of 1–2 of ``ids``, a result of one of a–e, a text answer."""
    return st.one_of(
        st.builds(lambda t: {"role": "user", "content": t}, st.sampled_from(["q", "again"])),
        st.builds(
            lambda chosen: {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": i, "function": {"name": "f", "arguments": "{}"}} for i in chosen
                ],
            },
            st.lists(ids, min_size=1, max_size=2, unique=True),
        ),
        st.builds(result, st.sampled_from(["a", "b", "c", "d", "e"])),
        st.builds(lambda t: {"role": "assistant", "content": t}, st.just("answer")),
    )


def compact_around_a_cut(
    store: Any, chat: Address, faults: Callable[[], list[str]], listed: Callable[[], list[str]]
) -> None:
    """A compaction cut between a call and its result: archived declarations leave the list and the answers, a live one answered by an archived result is listed again, and the next user turn heals both open calls (MEM-3)."""
    batches: list[list[dict[str, Any]]] = [
        [{"role": "user", "content": "q"}, result("early"), call("a", "b"), result("a")],
        [call("early", "c"), {"role": "assistant", "content": "then"}],
    ]
    for batch in batches:
        store.append(chat, prepare(batch, 1))
    bodies = store.load_bodies(chat)
    # cut after the call of a and b, before a's result: a's result keeps no archived declaration
    kept = bodies[3][0]
    digest = compaction.prefix_digest(bodies[:4])
    done = store.archive.compact(
        chat, kept, digest, lambda first, last: [{"role": "user", "content": "summary"}]
    )
    assert done is not None
    assert faults() == []
    assert listed() == ["early", "c"]  # its result archived: "early" is open again, as c is
    store.append(chat, prepare({"role": "user", "content": "next"}, 2))  # MEM-3 heals both
    tools = [result_id(r) for r in store.load(chat) if r["role"] == "tool"]
    assert tools == ["a", "early", "c"]
    assert faults() == []
