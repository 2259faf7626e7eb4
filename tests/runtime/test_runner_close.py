"""``AgentRunner.close`` closes its agents' models (an ``OpenAIChatModel``'s HTTP client).

Without it a process that makes runners (a server's, a chat's, a test's) leaves each
model's connection pool open, and its sockets to the provider, until the garbage
collector finds them (``ResourceWarning: unclosed <socket>``).
"""

from __future__ import annotations

import threading
from typing import Any

import httpx

from flowmem.core import Message
from flowmem.runtime.agent import Agent
from flowmem.runtime.models import ModelReply, OpenAIChatModel
from flowmem.runtime.runner import AgentRunner
from flowmem.store import MemoryStore
from tests.runtime.helpers import new_session


class Closable:
    """A model that counts its ``close()`` calls and, when ``hold`` is set, waits in ``complete``."""

    def __init__(self) -> None:
        self.closed = 0
        self.entered = threading.Event()
        self.hold = threading.Event()
        self.release = threading.Event()

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> ModelReply:
        """Answer ``ok`` (after ``release`` when held)."""
        self.entered.set()
        if self.hold.is_set():
            self.release.wait(30)
        return ModelReply("ok")

    def close(self) -> None:
        """Count the call."""
        self.closed += 1


class NoClose:
    """A model without ``close()`` (the ``Model`` protocol does not ask for one)."""

    def complete(self, messages: list[Message], tools: list[dict[str, Any]]) -> ModelReply:
        """Answer ``ok``."""
        return ModelReply("ok")


def test_closing_the_runner_closes_an_openai_models_http_client() -> None:
    client = httpx.Client()
    model = OpenAIChatModel("m", "http://127.0.0.1:9", "sk-test", client=client)
    store = MemoryStore()
    runner = AgentRunner(store, agents=[Agent("helper", model)])
    runner.close()
    assert client.is_closed
    store.close()


def test_a_model_shared_by_two_agents_is_closed_once_and_one_without_close_is_skipped() -> None:
    shared = Closable()
    store = MemoryStore()
    agents = [Agent("a", shared), Agent("b", shared), Agent("c", NoClose())]
    runner = AgentRunner(store, agents=agents)
    assert (
        runner.start_turn(new_session(store, agent="a"), "hi", wait=True)["status"] == "completed"
    )
    runner.close()
    assert shared.closed == 1
    store.close()


def test_a_turn_still_running_after_the_timeout_keeps_its_model_open() -> None:
    model = Closable()
    model.hold.set()
    store = MemoryStore()
    runner = AgentRunner(store, agents=[Agent("helper", model)])
    started = runner.start_turn(new_session(store), "hi", wait=False)
    assert model.entered.wait(20)
    runner.close(timeout=0.05)  # the model call is held: the turn cannot stop in time
    assert model.closed == 0
    model.release.set()
    assert runner.wait(started["turn_id"], 20)["status"] in {"completed", "stopped"}
    runner.close()
    assert model.closed == 1
    store.close()
