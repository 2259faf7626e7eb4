"""The SDK's ``OpenAIResponsesCompactionSession`` over ``FlowmemSession`` (issue 28 §2).

The compaction call (``client.responses.compact``) is a stand-in that returns what
the API returns: the user messages kept and one ``compaction`` item. The history
it replaces is archived, not cleared: in process, and over HTTP through the
``Client`` and the ``AsyncClient`` (``POST …/compact/replace``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.memory import OpenAIResponsesCompactionSession

from flowmem.core.compaction import SUMMARY_KEY
from flowmem.integrations.openai_agents import FlowmemRunHooks, FlowmemSession
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import open_store
from tests.client.conftest import in_process
from tests.integrations.scripted_model import ScriptedModel, call, text

set_tracing_disabled(True)

SID = "00000000-0000-0000-0000-00000000c0de"
HISTORY: list[Any] = [
    {"role": "user", "content": "weather in Lisbon?"},
    {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": '{"city": "Lisbon"}'},
    {"type": "function_call_output", "call_id": "c1", "output": "18C"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "18C"}]},
    {"role": "user", "content": "and Porto?"},
]
COMPACTED: list[Any] = [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "weather in Lisbon?"}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and Porto?"}]},
    {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"},
]


class StandInResponses:
    """``client.responses`` with ``compact``: records its input, returns COMPACTED."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def compact(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        return SimpleNamespace(output=[dict(item) for item in COMPACTED], usage=None)


@pytest.fixture(params=["memory", "sqlite"])
def service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryService]:
    url = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'agents.db'}"
    store = open_store(url)
    yield MemoryService(store)
    store.close()


def test_a_forced_compaction_replaces_the_history_and_archives_it(service: MemoryService) -> None:
    flowmem = FlowmemSession(SID, service)
    client = SimpleNamespace(responses=StandInResponses())
    session = OpenAIResponsesCompactionSession(SID, flowmem, client=client)  # type: ignore[arg-type]

    async def run() -> list[Any]:
        await session.add_items(HISTORY)
        await session.run_compaction({"force": True, "compaction_mode": "input"})
        return await session.get_items()

    items = asyncio.run(run())
    assert len(client.responses.calls) == 1
    assert items[-1] == {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"}
    assert [item.get("role") for item in items[:2]] == ["user", "user"]
    stored = service.load("session", flowmem.key, flowmem.context, include_archived=True)
    archived = stored.messages[: len(stored.messages) - stored.count]
    assert len(archived) == 5 and archived[0]["content"] == "weather in Lisbon?"
    live = stored.messages[len(archived) :]
    assert live[0]["metadata"][SUMMARY_KEY]["archived"] == 5

    async def late() -> None:  # a re-delivered output of the compacted call: a duplicate (MEM-1)
        await flowmem.add_items([HISTORY[2]])

    asyncio.run(late())
    assert flowmem.last_result is not None and flowmem.last_result.appended == 0


def test_a_failed_compaction_call_leaves_the_history(service: MemoryService) -> None:
    flowmem = FlowmemSession(SID, service)

    class Broken:
        async def compact(self, **kwargs: Any) -> Any:
            raise RuntimeError("the model is down")

    session = OpenAIResponsesCompactionSession(
        SID, flowmem, client=SimpleNamespace(responses=Broken())  # type: ignore[arg-type]
    )

    async def run() -> None:
        await session.add_items(HISTORY)
        with pytest.raises(RuntimeError):
            await session.run_compaction({"force": True, "compaction_mode": "input"})

    asyncio.run(run())
    stored = service.load("session", flowmem.key, flowmem.context, include_archived=True)
    assert stored.count == len(stored.messages) == 5


@pytest.mark.parametrize("kind", ["client", "async_client"])
def test_over_http_the_compacted_history_is_archived_too(kind: str, tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path / 'served.db'}")
    try:
        for server in in_process(store):
            memory = server.client("alice") if kind == "client" else server.async_client("alice")
            flowmem = FlowmemSession(SID, memory)
            client = SimpleNamespace(responses=StandInResponses())
            session = OpenAIResponsesCompactionSession(SID, flowmem, client=client)  # type: ignore[arg-type]
            items = asyncio.run(_added_then_compacted(session))
            assert items[-1] == {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"}
            alice = ExecutionContext(user_id="alice", session_id=SID)
            stored = MemoryService(store).load("session", flowmem.key, alice, include_archived=True)
            archived = stored.messages[: len(stored.messages) - stored.count]
            assert len(archived) == 5 and archived[0]["content"] == "weather in Lisbon?"
            assert stored.messages[5]["metadata"][SUMMARY_KEY]["archived"] == 5
    finally:
        store.close()


async def _added_then_compacted(session: OpenAIResponsesCompactionSession) -> list[Any]:
    """Add HISTORY, force a compaction, read the items back."""
    await session.add_items(HISTORY)
    await session.run_compaction({"force": True, "compaction_mode": "input"})
    return await session.get_items()


def test_the_run_hooks_of_a_compaction_session_store_ahead_in_its_flowmem_session(
    service: MemoryService,
) -> None:
    """``FlowmemRunHooks(compaction_session)``: the call is in flowmem when the tool starts, once after."""
    flowmem = FlowmemSession(SID, service)
    session = OpenAIResponsesCompactionSession(
        SID,
        flowmem,
        client=SimpleNamespace(responses=StandInResponses()),  # type: ignore[arg-type]
        should_trigger_compaction=lambda _: False,
    )
    seen: list[list[str]] = []

    def weather(city: str) -> str:
        rows = service.load("session", flowmem.key, flowmem.context).messages
        seen.append([r["role"] for r in rows])
        return "18C"

    model = ScriptedModel([[call("c1", "weather", city="Lisbon")], [text("18C.", 2)]])
    agent = Agent(name="helper", model=model, tools=[function_tool(weather, name_override="weather")])
    hooks = FlowmemRunHooks(session)
    asyncio.run(Runner.run(agent, "weather in Lisbon?", session=session, hooks=hooks))
    assert hooks.session is flowmem
    assert seen == [["user", "assistant"]]
    stored = service.load("session", flowmem.key, flowmem.context).messages
    assert [r["role"] for r in stored] == ["user", "assistant", "tool", "assistant"]
