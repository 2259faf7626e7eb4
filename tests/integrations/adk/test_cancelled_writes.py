"""A session's calls run one at a time, in the order made, and a late refusal is not silent (decision 0156).

A worker thread cannot be stopped: a run cancelled while ``append_event`` stores its
event (a client gone, a timeout) leaves the write going, and the service's per-session
lock is released at once. The session's next read and append, from the next run, must
not overtake it: an append that landed first made the cancelled one stale, refused in a
thread nobody awaited, and the event was lost unseen. ``HeldTables`` is the seam: the
store append of the event ``e1`` holds until the test lets it go.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import pytest

pytest.importorskip("google.adk")

from google.adk.errors import StaleSessionError
from google.adk.sessions import Session

from flowmem.integrations.adk import FlowmemSessionService
from flowmem.service import MemoryService
from flowmem.store import MemoryStore
from tests.integrations.adk.events import user
from tests.integrations.test_in_order import OVERTAKE_SECONDS, Gate, cancel_once_held

APP = "shop"
HELD = "e1"


class HeldTables:
    """The service's ADK tables, whose append of event ``e1`` waits for the gate's release; appends logged."""

    def __init__(self, tables: Any, gate: Gate) -> None:
        self.tables, self.gate = tables, gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self.tables, name)

    def append(self, key: Any, seen: Any, write: Any) -> Any:
        """Log the append's start and end; hold ``e1`` until released."""
        self.gate.events.append(("start", write.event_id))
        if write.event_id == HELD:
            self.gate.first_entered.set()
            self.gate.release.wait(30)
        else:
            self.gate.other_started.set()
        try:
            return self.tables.append(key, seen, write)
        finally:
            self.gate.events.append(("end", write.event_id))


def _service(memory: MemoryService, gate: Gate) -> FlowmemSessionService:
    service = FlowmemSessionService(memory)
    service.tables = HeldTables(service.tables, gate)
    return service


async def _read(service: FlowmemSessionService) -> Session:
    found = await service.get_session(app_name=APP, user_id="ana", session_id="s")
    assert found is not None
    return found


async def _stored(service: FlowmemSessionService) -> list[str]:
    return [event.id for event in (await _read(service)).events]


async def _release_after_a_while(gate: Gate) -> None:
    """Let the held append go once another append started, or after ``OVERTAKE_SECONDS``."""
    await asyncio.to_thread(gate.other_started.wait, OVERTAKE_SECONDS)
    gate.release.set()


def test_mem_3_the_next_runs_read_and_append_wait_for_an_append_whose_run_was_cancelled() -> None:
    gate = Gate()
    service = _service(MemoryService(MemoryStore()), gate)

    async def scenario() -> list[str]:
        session = await service.create_session(app_name=APP, user_id="ana", session_id="s")
        await cancel_once_held(service.append_event(session, user("first", 1)), gate)

        async def next_run() -> None:  # ADK's runner reads the session, then appends
            await service.append_event(await _read(service), user("second", 2))

        running = asyncio.create_task(next_run())
        await _release_after_a_while(gate)
        await running
        return await _stored(service)

    # before: the next run read the session without e1, stored e2, and e1 was refused stale unseen
    assert asyncio.run(scenario()) == ["e1", "e2"]
    assert gate.events == [("start", "e1"), ("end", "e1"), ("start", "e2"), ("end", "e2")]


def test_an_append_through_the_cancelled_runs_session_object_is_refused_stale_to_its_caller() -> None:
    gate = Gate()
    service = _service(MemoryService(MemoryStore()), gate)

    async def scenario() -> tuple[str, list[str]]:
        session = await service.create_session(app_name=APP, user_id="ana", session_id="s")
        await cancel_once_held(service.append_event(session, user("first", 1)), gate)
        later = asyncio.create_task(service.append_event(session, user("second", 2)))
        await _release_after_a_while(gate)
        try:
            await later
        except StaleSessionError:
            return "stale", await _stored(service)
        return "stored", await _stored(service)

    # the session object never saw e1: the caller is told to reload (before: e2 stored, e1 lost)
    assert asyncio.run(scenario()) == ("stale", ["e1"])


def test_an_append_cancelled_before_its_turn_is_never_made() -> None:
    gate = Gate()
    service = _service(MemoryService(MemoryStore()), gate)

    async def scenario() -> list[str]:
        session = await service.create_session(app_name=APP, user_id="ana", session_id="s")
        await cancel_once_held(service.append_event(session, user("first", 1)), gate)
        waiting = asyncio.create_task(service.append_event(await _read(other_view(service)), user("dropped", 2)))
        await asyncio.sleep(OVERTAKE_SECONDS)  # queued behind the held append
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        gate.release.set()
        return await _stored(service)

    assert asyncio.run(scenario()) == ["e1"]  # before: e2 stored (and e1 refused stale)
    assert ("start", "e2") not in gate.events


def other_view(service: FlowmemSessionService) -> FlowmemSessionService:
    """Another service over the same memory, unheld: reads the session without waiting in ``service``'s queue."""
    return FlowmemSessionService(service.memory)


def test_an_append_refused_after_its_run_was_cancelled_is_logged_with_the_event_it_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gate = Gate()
    memory = MemoryService(MemoryStore())
    service = _service(memory, gate)
    other = FlowmemSessionService(memory)  # another writer (another process, as far as it knows)

    async def scenario() -> list[str]:
        session = await service.create_session(app_name=APP, user_id="ana", session_id="s")
        await cancel_once_held(service.append_event(session, user("first", 1)), gate)
        await other.append_event(await _read(other), user("elsewhere", 2))
        gate.release.set()
        return await _stored(service)  # queued behind the held append: it has ended

    with caplog.at_level(logging.ERROR, logger="flowmem"):
        assert asyncio.run(scenario()) == ["e2"]
    lost = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(lost) == 1, caplog.text
    assert "event e1" in lost[0] and "session 's'" in lost[0] and "SessionStaleError" in lost[0]
