"""The history's async forms run one at a time per buffer, in the order made (decision 0152).

A worker thread cannot be stopped: a run cancelled while its history's ``aadd_messages``
writes (a timeout around the chain, a client gone) leaves the write going. The next
call of the same history, from this object or from the one ``RunnableWithMessageHistory``
makes for the next run, must not be stored before it. ``Gate``
(``tests/integrations/test_in_order.py``) holds the append of ``"first"`` until released.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.messages import AIMessage, HumanMessage

from flowmem.integrations.langchain import FlowmemChatMessageHistory
from tests.integrations.test_in_order import (
    OVERTAKE_SECONDS,
    Gate,
    cancel_once_held,
    release_when_overtaken_or_after_a_while,
)


def _history(gate: Gate, session: str = "s1") -> FlowmemChatMessageHistory:
    return FlowmemChatMessageHistory(gate, session_id=session, user_id="alice")


async def _cancel_the_held_first(history: FlowmemChatMessageHistory, gate: Gate) -> None:
    """Start the write of ``"first"``, and cancel its caller once its thread holds it."""
    await cancel_once_held(history.aadd_messages([HumanMessage("first")]), gate)


def _contents(history: FlowmemChatMessageHistory) -> list[Any]:
    return [m.content for m in history.messages]


@pytest.mark.parametrize("same_object", [True, False], ids=["same-history", "history-per-run"])
def test_mem_3_a_write_whose_caller_was_cancelled_is_stored_before_the_next_one(
    same_object: bool,
) -> None:
    gate = Gate()
    history = _history(gate)
    later = history if same_object else _history(gate)

    async def scenario() -> None:
        await _cancel_the_held_first(history, gate)
        second = asyncio.create_task(later.aadd_messages([AIMessage("second")]))
        await release_when_overtaken_or_after_a_while(gate)
        await second

    asyncio.run(scenario())
    assert gate.events == [
        ("start", "first"),
        ("end", "first"),
        ("start", "second"),
        ("end", "second"),
    ]
    assert _contents(history) == ["first", "second"]


def test_a_read_after_a_cancelled_write_sees_it_and_other_buffers_are_not_held_up() -> None:
    gate = Gate()
    history = _history(gate)
    other = _history(gate, session="s2")

    async def scenario() -> tuple[list[Any], list[Any]]:
        await _cancel_the_held_first(history, gate)
        await other.aadd_messages([HumanMessage("elsewhere")])  # another buffer: not queued behind
        assert not gate.release.is_set()
        reading = asyncio.create_task(history.aget_messages())
        # time for the read to overtake the write (it must not)
        await asyncio.sleep(OVERTAKE_SECONDS)
        gate.release.set()
        return [m.content for m in await reading], [m.content for m in await other.aget_messages()]

    mine, theirs = asyncio.run(scenario())
    assert mine == ["first"] and theirs == ["elsewhere"]


def test_aclear_after_a_cancelled_write_clears_it_too() -> None:
    gate = Gate()
    history = _history(gate)

    async def scenario() -> None:
        await _cancel_the_held_first(history, gate)
        clearing = asyncio.create_task(_history(gate).aclear())
        await asyncio.sleep(OVERTAKE_SECONDS)
        gate.release.set()
        await clearing

    asyncio.run(scenario())
    assert _contents(history) == []
