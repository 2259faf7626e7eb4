"""The repair log of the buffers the adapters write on their own path, on every backend (issue 37 §2).

A LangGraph thread's lines (``store.checkpoints``), a Google ADK session's events
(``store.adk``) and a pydantic-ai conversation's lines (``store.conversations``) log
their MEM-3 placeholders and MEM-10 replacements in the write's own transaction: a
write that is refused logs nothing, and a history copied to a new line logs nothing
again.
"""

from __future__ import annotations

from typing import Any

import pytest

from flowmem.core import result_id
from flowmem.errors import QuotaExceededError, SessionStaleError
from flowmem.store import Store
from flowmem.store.adk import AdkKey, AdkSession, EventWrite, Seen, adk_of, events_address
from flowmem.store.base import SESSION_SCOPE, Address, Quotas, SessionClaim, WriteGuard
from flowmem.store.checkpoints import (
    CheckpointPut,
    LineAppend,
    LineMovedError,
    StoredCheckpoint,
    checkpoints_of,
)
from flowmem.store.checkpoints.repairs import HEALED_ID_PREFIX, is_placeholder
from flowmem.store.conversations import (
    LINE,
    ConversationWrite,
    NewEntry,
    StoredConversation,
    conversations_of,
)
from flowmem.store.repairs import RepairEntry


def _log(store: Store, address: Address) -> list[tuple[str, list[str], int]]:
    entries: list[RepairEntry] = store.repairs.page(address, limit=1000).entries  # type: ignore[attr-defined]
    return [(e.rule, e.call_ids, e.count) for e in entries]


def _positions(store: Store, address: Address) -> list[list[int]]:
    return [e.positions for e in store.repairs.page(address, limit=1000).entries]  # type: ignore[attr-defined]


def _guard(sid: str) -> WriteGuard:
    return WriteGuard(None, sid, SessionClaim(owner="alice", create=True, created_at=1.0))


# ---- a LangGraph thread's lines ------------------------------------------------------------


def _lc(role: str, msg_id: str, **meta: Any) -> dict[str, Any]:
    """A row as ``FlowmemSaver`` stores a LangChain message (its id in ``metadata.extra``)."""
    return {
        "role": role,
        "content": "" if role == "assistant" else msg_id,
        "metadata": {"extra": {"langchain": {"fields": {"id": msg_id}}}, **meta},
        "timestamp": 1,
    }


CALL = _lc("assistant", "a1", tool_calls=[{"tool_call_id": "w1", "name": "weather", "args": {}}])
PLACEHOLDER = _lc("tool", f"{HEALED_ID_PREFIX}w1", tool_call_id="w1")
LATE = _lc("tool", "late-w1", tool_call_id="w1")
CRASHED = [_lc("user", "h0"), CALL, _lc("user", "h1")]
HEALED = [_lc("user", "h0"), CALL, PLACEHOLDER, _lc("user", "h1")]


def _put(store: Store, cid: str, parent: str | None, *lines: LineAppend) -> None:
    checkpoint = StoredCheckpoint("t1", "", cid, parent, ("json", b"{}"), ("json", b"{}"))
    checkpoints_of(store).put_checkpoint(CheckpointPut(checkpoint, [], list(lines), _guard("t1")))


def _line(key: str) -> Address:
    return Address(SESSION_SCOPE, "t1", key)


def test_a_placeholder_row_is_flowmems_mark_or_flowmem_healings_message_id() -> None:
    assert is_placeholder(PLACEHOLDER)
    assert is_placeholder({"role": "tool", "content": "", "metadata": {"tool_call_id": "w1", "healed": True}})
    assert not is_placeholder(LATE)
    assert not is_placeholder(_lc("user", f"{HEALED_ID_PREFIX}w1"))  # not a tool row


def test_mem_3_mem_10_a_langgraph_heal_and_its_late_result_are_logged_on_the_healed_line(store: Store) -> None:
    _put(store, "cp1", None, LineAppend("langgraph", 0, CRASHED))
    assert _log(store, _line("langgraph")) == []
    # FlowmemHealing rewrote the list: a new line, one full copy, with the placeholder
    _put(store, "cp2", "cp1", LineAppend("langgraph#cp2", 0, HEALED))
    assert _log(store, _line("langgraph#cp2")) == [("MEM-3", ["w1"], 1)]
    assert _positions(store, _line("langgraph#cp2")) == [[2]]
    _put(store, "cp3", "cp2", LineAppend("langgraph#cp2", 4, [_lc("assistant", "a2")]))
    assert len(_log(store, _line("langgraph#cp2"))) == 1  # a step with no tool row logs nothing
    _put(store, "cp4", "cp3", LineAppend("langgraph#cp2", 5, [LATE]))
    assert _log(store, _line("langgraph#cp2")) == [("MEM-10", ["w1"], 1), ("MEM-3", ["w1"], 1)]
    # the placeholder stays in the line: the replacement is the late row, the heal the placeholder
    assert _positions(store, _line("langgraph#cp2")) == [[5], [2]]
    _put(store, "cp5", "cp4", LineAppend("langgraph#cp2", 6, [dict(LATE, content="again")]))
    assert len(_log(store, _line("langgraph#cp2"))) == 2  # the placeholder was superseded once
    assert _log(store, _line("langgraph")) == []


def test_a_langgraph_history_copied_to_a_new_line_logs_nothing_again(store: Store) -> None:
    _put(store, "cp1", None, LineAppend("langgraph", 0, CRASHED))
    _put(store, "cp2", "cp1", LineAppend("langgraph#cp2", 0, HEALED))
    _put(store, "cp3", "cp2", LineAppend("langgraph#cp2", 4, [LATE]))
    _put(store, "cp4", "cp3", LineAppend("langgraph#cp4", 0, [*HEALED, LATE, _lc("user", "h2")]))
    _put(store, "cp5", "cp4", LineAppend("langgraph#cp5", 0, HEALED))
    assert _log(store, _line("langgraph#cp4")) == []
    assert _log(store, _line("langgraph#cp5")) == []
    assert len(_log(store, _line("langgraph#cp2"))) == 2


def test_a_refused_langgraph_write_logs_nothing(store: Store) -> None:
    _put(store, "cp1", None, LineAppend("langgraph", 0, CRASHED))
    with pytest.raises(LineMovedError):  # the line moved: nothing stored, nothing logged
        _put(store, "cp2", "cp1", LineAppend("langgraph#cp2", 0, HEALED), LineAppend("langgraph", 1, []))
    assert _log(store, _line("langgraph#cp2")) == []
    used = store.usage("alice")
    store.set_quotas(Quotas(bytes=used.bytes + 10))
    with pytest.raises(QuotaExceededError):
        _put(store, "cp2", "cp1", LineAppend("langgraph#cp2", 0, HEALED))
    assert _log(store, _line("langgraph#cp2")) == []
    assert store.usage("alice") == used
    store.set_quotas(Quotas())
    _put(store, "cp2", "cp1", LineAppend("langgraph#cp2", 0, HEALED))
    assert _log(store, _line("langgraph#cp2")) == [("MEM-3", ["w1"], 1)]


def test_a_langgraph_lines_log_counts_against_the_owner_and_goes_with_the_thread(store: Store) -> None:
    _put(store, "cp1", None, LineAppend("langgraph", 0, CRASHED))
    _put(store, "cp2", "cp1", LineAppend("langgraph#cp2", 0, HEALED))
    assert _log(store, _line("langgraph#cp2")) == [("MEM-3", ["w1"], 1)]
    checkpoints_of(store).delete_thread("t1")
    assert _log(store, _line("langgraph#cp2")) == []
    assert store.usage("alice").bytes == 0  # the entry was counted for alice, and uncounted with it


# ---- a Google ADK session's events ---------------------------------------------------------


def _adk(store: Store) -> None:
    adk_of(store).create(AdkSession("s1", "app", "alice", created_at=1.0, updated_at=1.0), {}, {}, _guard("s1"))


def _event(n: int, row: dict[str, Any]) -> EventWrite:
    return EventWrite([{"metadata": {}, "timestamp": n, **row}], f"e{n}", float(n))


def _append(store: Store, n: int, row: dict[str, Any]) -> None:
    adk_of(store).append(AdkKey("app", "alice", "s1"), Seen(n - 1), _event(n, row))


ADK_CALL = {"role": "assistant", "content": "", "metadata": {"tool_calls": [{"tool_call_id": "c1", "name": "f"}]}}
ADK_RESULT = {"role": "tool", "content": "sunny", "metadata": {"tool_call_id": "c1"}}


def test_mem_3_mem_10_an_adk_heal_and_its_late_result_are_logged_in_the_events_buffer(store: Store) -> None:
    _adk(store)
    _append(store, 1, {"role": "user", "content": "weather?"})
    _append(store, 2, ADK_CALL)
    assert _log(store, events_address("s1")) == []
    _append(store, 3, {"role": "user", "content": "still there?"})
    assert _log(store, events_address("s1")) == [("MEM-3", ["c1"], 1)]
    rows = store.load(events_address("s1"))
    assert [result_id(rows[i]) for (i,) in _positions(store, events_address("s1"))] == ["c1"]
    _append(store, 4, ADK_RESULT)
    assert _log(store, events_address("s1")) == [("MEM-10", ["c1"], 1), ("MEM-3", ["c1"], 1)]


def test_a_stale_or_refused_adk_event_logs_nothing(store: Store) -> None:
    _adk(store)
    _append(store, 1, ADK_CALL)
    with pytest.raises(SessionStaleError):
        adk_of(store).append(AdkKey("app", "alice", "s1"), Seen(0), _event(2, {"role": "user", "content": "x"}))
    used = store.usage("alice")
    store.set_quotas(Quotas(bytes=used.bytes + 10))
    with pytest.raises(QuotaExceededError):
        _append(store, 2, {"role": "user", "content": "still there?"})
    assert _log(store, events_address("s1")) == []
    assert store.usage("alice") == used


# ---- a pydantic-ai conversation's lines ----------------------------------------------------


def _pa(entry: str, role: str, **meta: Any) -> dict[str, Any]:
    return {"role": role, "content": entry if role != "assistant" else "",
            "metadata": {"pydantic_ai": {"entry": entry}, **meta}, "timestamp": 1}


def _save(store: Store, revision: str, expected: str | None, parent: str | None, *entries: NewEntry) -> bool:
    head = entries[-1].entry_id
    record = StoredConversation("c1", revision, None, 1, {"head_id": head})
    write = ConversationWrite(record, head, parent, list(entries))
    return conversations_of(store).write(write, expected, _guard("c1"))


PA_CALL = _pa("e2", "assistant", tool_calls=[{"tool_call_id": "p1", "name": "f", "args": {}}])
PA_LINE = Address(SESSION_SCOPE, "c1", LINE)


def test_mem_3_a_conversations_prompt_heal_is_logged_on_its_line(store: Store) -> None:
    assert _save(store, "r1", None, None, NewEntry("e1", [_pa("e1", "user")]), NewEntry("e2", [PA_CALL]))
    assert _save(store, "r2", "r1", "e2", NewEntry("e3", [_pa("e3", "user")]))
    assert _log(store, PA_LINE) == [("MEM-3", ["p1"], 1)]


def test_mem_3_mem_10_a_placeholder_the_store_brings_is_logged_once_and_its_real_result_replaces_it(
    store: Store,
) -> None:
    assert _save(store, "r1", None, None, NewEntry("e1", [_pa("e1", "user")]), NewEntry("e2", [PA_CALL]))
    healed = _pa("e3", "tool", tool_call_id="p1", healed=True)
    assert _save(store, "r2", "r1", "e2", NewEntry("e3", [healed]), NewEntry("e4", [_pa("e4", "user")]))
    assert _log(store, PA_LINE) == [("MEM-3", ["p1"], 1)]
    assert _save(store, "r3", "r2", "e4", NewEntry("e5", [dict(healed, metadata={**healed["metadata"]})]))
    assert _log(store, PA_LINE) == [("MEM-3", ["p1"], 1)]  # the line held it: MEM-1, no new heal
    assert _save(store, "r4", "r3", "e5", NewEntry("e6", [_pa("e6", "tool", tool_call_id="p1")]))
    assert _log(store, PA_LINE) == [("MEM-10", ["p1"], 1), ("MEM-3", ["p1"], 1)]


def test_a_refused_conversation_write_logs_nothing(store: Store) -> None:
    assert _save(store, "r1", None, None, NewEntry("e1", [_pa("e1", "user")]), NewEntry("e2", [PA_CALL]))
    assert not _save(store, "r2", "stale", "e2", NewEntry("e3", [_pa("e3", "user")]))
    used = store.usage("alice")
    store.set_quotas(Quotas(bytes=used.bytes + 10))
    with pytest.raises(QuotaExceededError):
        _save(store, "r2", "r1", "e2", NewEntry("e3", [_pa("e3", "user")]))
    assert _log(store, PA_LINE) == []
    assert store.usage("alice") == used
