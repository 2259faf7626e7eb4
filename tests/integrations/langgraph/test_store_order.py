"""``FlowmemStore``'s batches run one at a time per store, in the order made (decision 0156).

A worker thread cannot be stopped: a graph step cancelled while its ``aput`` writes (a
step timeout, a run cancelled) leaves the write going. A later ``put`` of the same key,
from the next step or the next run, must not land before it and then be overwritten by
it (last writer wins), and a read made after must see it. LangGraph's own async stores
(``AsyncBatchedBaseStore``: ``AsyncPostgresStore``, ``AsyncSqliteStore``) run one batch at
a time per store and skip an operation whose caller left before its batch started; so
does ``FlowmemStore`` (``InOrder``). ``StoreGate`` is the seam: its write of an item whose
value is ``{"v": "first"}`` holds until the test lets it go.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("langgraph")

import flowmem.integrations.langgraph.store as store_module
from flowmem.errors import ConflictError
from flowmem.integrations.langgraph.store import FlowmemStore
from flowmem.service.vector_kinds import Put
from tests.integrations.test_in_order import (
    OVERTAKE_SECONDS,
    Gate,
    cancel_once_held,
    release_when_overtaken_or_after_a_while,
)

NAMESPACE = ("users", "alice", "memories")


class StoreGate(Gate):
    """A ``Gate`` whose record write of ``{"v": "first"}`` waits for ``release``; every write logged.

    With ``refuse`` set, the held write raises ``ConflictError`` once released (a store's refusal).
    """

    refuse = False

    def held(self, value: Any, write: Callable[[], Any]) -> Any:
        """Run ``write`` of an item whose value is ``value``: log its start and end; hold ``"first"`` until released."""
        content = value["value"]["v"]
        self.events.append(("start", content))
        try:
            if content == "first":
                self.first_entered.set()
                self.release.wait(30)
                if self.refuse:
                    raise ConflictError("refused by the test")
            else:
                self.other_started.set()
            return write()
        finally:
            self.events.append(("end", content))

    def write_raw(self, scope: str, scope_id: str, key: str, value: Any, *args: Any, **kwargs: Any) -> Any:
        """A put written by itself (``writes_in_one_transaction`` off), held as ``held`` says."""
        return self.held(value, lambda: super(StoreGate, self).write_raw(scope, scope_id, key, value, *args, **kwargs))


@pytest.fixture(autouse=True)
def _gated_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch's one transaction (the store's default path) is held and logged as ``StoreGate.write_raw`` is."""
    real = store_module.write_records

    def gated(memory: Any, writer: Any, writes: list[Any], *args: Any) -> None:
        if not isinstance(memory, StoreGate):
            return real(memory, writer, writes, *args)
        (put,) = [write for write in writes if isinstance(write, Put)]  # each test's batch puts one item
        return memory.held(put.value, lambda: real(memory, writer, writes, *args))  # type: ignore[no-any-return]

    monkeypatch.setattr(store_module, "write_records", gated)


def _put(store: FlowmemStore, content: str) -> Any:
    return store.aput(NAMESPACE, "prefs", {"v": content})


def _value(store: FlowmemStore) -> Any:
    item = store.get(NAMESPACE, "prefs")
    return None if item is None else item.value["v"]


def test_a_put_whose_caller_was_cancelled_lands_before_a_later_put_of_the_same_key() -> None:
    gate = StoreGate()
    store = FlowmemStore(gate)

    async def scenario() -> None:
        await cancel_once_held(_put(store, "first"), gate)
        second = asyncio.create_task(_put(store, "second"))
        await release_when_overtaken_or_after_a_while(gate)
        await second

    asyncio.run(scenario())
    assert gate.events == [("start", "first"), ("end", "first"), ("start", "second"), ("end", "second")]
    assert _value(store) == "second"  # the later put is the one kept (before: "first", written last)


def test_a_read_after_a_cancelled_put_sees_it_and_another_store_is_not_held_up() -> None:
    gate = StoreGate()
    store = FlowmemStore(gate)
    other = FlowmemStore(gate)  # its own queue

    async def scenario() -> tuple[Any, Any]:
        await cancel_once_held(_put(store, "first"), gate)
        await other.aput(("docs",), "elsewhere", {"v": "elsewhere"})  # not queued behind the held put
        assert not gate.release.is_set()
        reading = asyncio.create_task(store.aget(NAMESPACE, "prefs"))
        await asyncio.sleep(OVERTAKE_SECONDS)  # time for the read to overtake the put (it must not)
        gate.release.set()
        return await reading, await other.aget(("docs",), "elsewhere")

    mine, theirs = asyncio.run(scenario())
    assert mine is not None and mine.value == {"v": "first"}
    assert theirs is not None and theirs.value == {"v": "elsewhere"}


def test_a_put_cancelled_before_its_turn_is_never_made() -> None:
    gate = StoreGate()
    store = FlowmemStore(gate)

    async def scenario() -> None:
        await cancel_once_held(_put(store, "first"), gate)
        waiting = asyncio.create_task(_put(store, "dropped"))
        await asyncio.sleep(OVERTAKE_SECONDS)  # planned and queued behind the held put
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        third = asyncio.create_task(_put(store, "third"))
        await release_when_overtaken_or_after_a_while(gate)
        await third

    asyncio.run(scenario())
    assert gate.events == [("start", "first"), ("end", "first"), ("start", "third"), ("end", "third")]
    assert _value(store) == "third"


def test_a_synchronous_put_made_after_a_cancelled_aput_waits_for_it() -> None:
    """A sync node of an async graph runs in a thread and calls ``put``: it takes its turn too."""
    gate = StoreGate()
    store = FlowmemStore(gate)

    async def scenario() -> None:
        await cancel_once_held(_put(store, "first"), gate)
        second = asyncio.create_task(asyncio.to_thread(store.put, NAMESPACE, "prefs", {"v": "second"}))
        await release_when_overtaken_or_after_a_while(gate)
        await second

    asyncio.run(scenario())
    assert gate.events == [("start", "first"), ("end", "first"), ("start", "second"), ("end", "second")]
    assert _value(store) == "second"


def test_a_put_refused_after_its_caller_was_cancelled_is_logged_with_what_was_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = StoreGate()
    gate.refuse = True
    store = FlowmemStore(gate)

    async def scenario() -> None:
        await cancel_once_held(_put(store, "first"), gate)
        gate.release.set()
        await store.aget(NAMESPACE, "prefs")  # queued behind it: the put has ended

    with caplog.at_level(logging.ERROR, logger="flowmem"):
        asyncio.run(scenario())
    lost = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(lost) == 1, caplog.text
    message = lost[0].getMessage()
    assert "put ('users', 'alice', 'memories') 'prefs'" in message and "ConflictError" in message
    assert _value(store) is None
