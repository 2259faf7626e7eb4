"""Shared builders for the runtime tests: sessions, agents and tools over a store."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from flowmem.core import check_sendable, normalize
from flowmem.runtime.agent import Agent, MemorySpec
from flowmem.runtime.loop import TurnEvent
from flowmem.runtime.models import OpenAIChatModel
from flowmem.runtime.runner import AgentRunner
from flowmem.runtime.tools import ToolContext, ToolRegistry
from flowmem.service import MemoryService
from flowmem.store.base import Address, SessionRecord, Store

T = TypeVar("T")
SYSTEM = "You are a careful assistant."
OPENED: list[Any] = []
"""What a test opened through ``opened`` (every ``make_runner`` runner): ``close_opened`` closes it."""
NUMBERS = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}


def new_session(store: Store, owner: str | None = "alice", agent: str = "helper") -> SessionRecord:
    """Create an idle session in ``store``."""
    now = time.time()
    record = SessionRecord(str(uuid.uuid4()), "test", owner, "idle", agent, {}, now, now)
    return store.create_session(record)


def counting_tools(
    count_dir: Path, hooks: dict[str, Callable[[], None]] | None = None
) -> ToolRegistry:
    """Tools that record each execution as a line in ``count_dir/<tool>.count``.

    ``hooks`` maps a tool name to something run after the execution is counted (a
    crash, a stop, a wait), so a test can interrupt a tool in the middle of its run.
    """
    registry = ToolRegistry()
    hooks = hooks or {}

    def counted(name: str) -> None:
        with open(count_dir / f"{name}.count", "a", encoding="utf-8") as handle:
            handle.write("x\n")
        if name in hooks:
            hooks[name]()

    def add(a: int, b: int) -> int:
        counted("add")
        return a + b

    def weather(city: str) -> str:
        counted("weather")
        return f"18C and sunny in {city}"

    def clock() -> str:
        counted("clock")
        return "12:00"

    def remember(fact: str, tool_context: ToolContext) -> dict[str, Any]:
        counted("remember")
        node = tool_context.node("memory_write", {"scope": "user"})
        out = node.process({"key": "fact", "value": fact}, tool_context.context)
        return {"success": out["success"], "scope_id": out["resolved_scope_id"]}

    def recall(tool_context: ToolContext) -> dict[str, Any]:
        counted("recall")
        node = tool_context.node("memory_read", {"scope": "user"})
        out = node.process({"key": "fact", "default_value": None}, tool_context.context)
        return {"found": out["found"], "value": out["value"], "scope_id": out["resolved_scope_id"]}

    registry.register("add", add, NUMBERS, "Add two integers.")
    registry.register(
        "weather",
        weather,
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "Current weather of a city.",
    )
    registry.register("clock", clock, None, "The time.")
    registry.register(
        "remember",
        remember,
        {"type": "object", "properties": {"fact": {"type": "string"}}, "required": ["fact"]},
        "Remember a fact about the user.",
    )
    registry.register("recall", recall, None, "Recall the remembered fact about the user.")
    return registry


def executions(count_dir: Path, name: str) -> int:
    """How many times tool ``name`` ran."""
    path = count_dir / f"{name}.count"
    return len(path.read_text().splitlines()) if path.exists() else 0


def make_runner(
    store: Store,
    base_url: str,
    tools: ToolRegistry,
    *,
    memory: MemorySpec | None = None,
    max_steps: int = 8,
    clock: Callable[[], float] = time.time,
    stale_after: float = 30.0,
    events: list[TurnEvent] | None = None,
) -> AgentRunner:
    """An ``AgentRunner`` with one agent, ``helper``, on the fake provider at ``base_url``."""
    model = OpenAIChatModel("fake-model", base_url, "sk-test", max_retries=0, timeout=10)
    agent = Agent("helper", model, SYSTEM, tools, memory or MemorySpec(), max_steps=max_steps)
    service = MemoryService(store, clock=clock)
    runner = AgentRunner(
        store,
        service,
        [agent],
        stale_after=stale_after,
        clock=clock,
        on_event=events.append if events is not None else None,
    )
    return opened(runner)


def opened(thing: T) -> T:
    """Return ``thing`` (a runner, a model: anything with ``close()``), closed when the test ends."""
    OPENED.append(thing)
    return thing


def close_opened() -> None:
    """Close what the test opened, last first (a runner: its turns stopped, its model's client closed)."""
    while OPENED:
        OPENED.pop().close()


def buffer(store: Store, session: SessionRecord, key: str = "chat_history") -> list[dict[str, Any]]:
    """The session's conversation buffer as stored."""
    return store.load(Address("session", session.id, key))


def assert_sendable(rows: list[dict[str, Any]]) -> None:
    """The buffer normalizes to a sendable history that keeps every row (nothing dropped)."""
    result = normalize(rows)
    assert check_sendable(result.messages) == []
    assert result.dropped == 0, result
