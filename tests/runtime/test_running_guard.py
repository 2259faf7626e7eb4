"""A reset or a buffer clear racing a turn's start: the running-turn check and the clear are one.

Each round starts a turn and, at the same moment, resets the session (or clears its
conversation buffer through the memory service, what ``DELETE /v1/buffers/session/…``
calls). The store is wrapped so that the clear reaches the store a random few
milliseconds after the caller checked the session, which is the window the race
needs. The model holds the turn open until the reset has answered. A correct
server either refuses the reset (409) or clears before the turn's user message is
written, so the buffer always ends as the turn's user message and reply; a reset
accepted while the turn ran leaves the reply without its user message.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flowmem.access import PERM_CREATE, Principal
from flowmem.core import Message
from flowmem.errors import ConflictError
from flowmem.runtime.agent import Agent
from flowmem.runtime.models import ModelReply
from flowmem.runtime.runner import AgentRunner
from flowmem.service import MemoryService
from flowmem.sessions import SessionService, memory_context
from flowmem.store import Address, Store
from tests.runtime.helpers import new_session
from tests.store.conftest import BACKENDS, open_backend

ROUNDS = 25


class SlowClear:
    """A store whose ``clear`` starts a random 0-10 ms late (the check-then-clear window)."""

    def __init__(self, store: Store, rng: random.Random) -> None:
        self._store = store
        self._rng = rng

    def clear(self, address: Address, guard_session: str | None = None) -> int:
        """Wait a moment, then clear (with the guard, when the caller gives one)."""
        time.sleep(self._rng.uniform(0, 0.01))
        if guard_session is None:
            return self._store.clear(address)
        return self._store.clear(address, guard_session=guard_session)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class HeldModel:
    """Answers ``done`` once ``release`` is set (the turn stays running until then)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> ModelReply:
        """Wait for the round to let the turn finish."""
        self.release.wait(20)
        return ModelReply("done")


@pytest.fixture(params=BACKENDS)
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh store of each backend kind: memory, SQLite, PostgreSQL."""
    store = open_backend(request.param, request, tmp_path / "db")
    try:
        yield store
    finally:
        store.close()


def test_a_reset_racing_a_turn_start_is_refused_or_comes_first(any_store: Store) -> None:
    rng = random.Random(12)
    store: Any = SlowClear(any_store, rng)
    model = HeldModel()
    memory = MemoryService(store)
    runner = AgentRunner(store, memory, [Agent("helper", model, "")])
    sessions = SessionService(store, memory, runner)
    alice = Principal("alice", frozenset({PERM_CREATE}))
    outcomes: list[str] = []
    try:
        for index in range(ROUNDS):
            model.release.clear()
            session = new_session(any_store, owner="alice")
            started = threading.Barrier(2)
            turn: dict[str, Any] = {}

            def start(session: Any, started: threading.Barrier, turn: dict[str, Any]) -> None:
                started.wait(10)
                turn.update(runner.start_turn(session, "hi", wait=False))

            starter = threading.Thread(target=start, args=(session, started, turn))
            starter.start()
            started.wait(10)
            time.sleep(rng.uniform(0, 0.004))
            try:
                if index % 2:
                    sessions.reset(alice, session.id)
                else:
                    memory.clear("session", "chat_history", memory_context(session))
                outcomes.append("cleared")
            except ConflictError:
                outcomes.append("conflict")
            finally:
                model.release.set()
                starter.join(20)
            assert runner.wait(turn["turn_id"], 20)["status"] == "completed"
            rows = any_store.load(Address("session", session.id, "chat_history"))
            assert [(r["role"], r["content"]) for r in rows] == [
                ("user", "hi"),
                ("assistant", "done"),
            ], (index, outcomes[-1])
    finally:
        model.release.set()
        runner.close()
    assert "conflict" in outcomes  # the race was run: some clears met a running turn
