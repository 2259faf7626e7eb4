"""``FlowmemSession`` with the real openai-agents ``Runner`` and a scripted model.

``service`` and ``sqlite_service`` each also run as ``remote``: a ``Client`` of a
real ``flowmem serve`` (calls in a worker thread), and as ``async-remote``: an
``AsyncClient`` of it (calls awaited on the loop, no thread;
``tests/integrations/backends.py``).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.exceptions import UserError
from agents.memory.session import Session

from flowmem.core import HEALED_CONTENT, check_sendable
from flowmem.errors import ConfigurationError, InvalidMessageError
from flowmem.integrations.in_order import InOrder
from flowmem.integrations.openai_agents import FlowmemSession, FlowmemSessionSettings
from flowmem.memory import AsyncMemory, Memory
from flowmem.service import MemoryService
from flowmem.store import MemoryStore, open_store
from flowmem.store.base import SupportsPopLast
from tests.formats.sdk import assert_responses
from tests.integrations.backends import (
    ASYNC_REMOTES,
    REMOTES,
    SERVERS,
    remote_memory,
    shared_of,
    sync_of,
)
from tests.integrations.scripted_model import ScriptedModel, call, text
from tests.integrations.session_contract import hooks_of

set_tracing_disabled(True)  # no trace export from tests (the network is loopback only)

USER_PORTO = {"role": "user", "content": "and Porto?"}
CALL_ITEM = {
    "type": "function_call",
    "call_id": "c2",
    "name": "weather",
    "arguments": '{"city": "Porto"}',
}
OUTPUT_ITEM = {"type": "function_call_output", "call_id": "c2", "output": "21C"}


@pytest.fixture(params=["memory", "sqlite", *REMOTES, *ASYNC_REMOTES])
def service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory | AsyncMemory]:
    if request.param in SERVERS:
        yield remote_memory(request, kind=request.param)
        return
    store = (
        MemoryStore()
        if request.param == "memory"
        else open_store(f"sqlite:///{tmp_path / 'agents.db'}")
    )
    yield MemoryService(store)
    store.close()


@pytest.fixture(params=["sqlite", *REMOTES, *ASYNC_REMOTES])
def sqlite_service(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Memory | AsyncMemory]:
    if request.param in SERVERS:
        yield remote_memory(request, kind=request.param)
        return
    store = open_store(f"sqlite:///{tmp_path / 'agents.db'}")
    yield MemoryService(store)
    store.close()


def _weather(city: str) -> str:
    return {"Lisbon": "18C", "Porto": "21C"}.get(city, "unknown")


def _rows(session: FlowmemSession) -> list[dict[str, Any]]:
    return sync_of(session.service).load(session.scope, session.key, session.context).messages


def _untimed(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows without their timestamps (the second each was stored: two writes can straddle one)."""
    assert all(isinstance(row.get("timestamp"), int) for row in rows), rows
    return [{k: v for k, v in row.items() if k != "timestamp"} for row in rows]


def test_session_satisfies_the_sdk_protocol(service: Memory | AsyncMemory) -> None:
    assert isinstance(FlowmemSession("s1", service), Session)


def test_runner_runs_several_turns_over_a_sqlite_session(sqlite_service: Memory | AsyncMemory) -> None:
    model = ScriptedModel(
        [
            [text("Checking.", 1), call("c1", "weather", city="Lisbon")],
            [text("18C in Lisbon.", 2)],
            [text("You asked about Lisbon.", 3)],
        ]
    )
    agent = Agent(
        name="helper",
        instructions="be brief",
        model=model,
        tools=[function_tool(_weather, name_override="weather")],
    )
    session = FlowmemSession("s1", sqlite_service)

    async def scenario() -> list[Any]:
        first = await Runner.run(agent, "weather in Lisbon?", session=session, hooks=hooks_of(session))
        second = await Runner.run(agent, "what did I ask?", session=session, hooks=hooks_of(session))
        return [first.final_output, second.final_output, await session.get_items()]

    first, second, items = asyncio.run(scenario())
    assert (first, second) == ("18C in Lisbon.", "You asked about Lisbon.")
    assert_responses(items)
    assert [i.get("role") or i["type"] for i in items] == [
        "user",
        "assistant",
        "function_call",
        "function_call_output",
        "assistant",
        "user",
        "assistant",
    ]
    assert model.inputs[-1][:5] == items[:5]  # the third model call saw the stored history
    rows = _rows(session)
    assert rows[1]["metadata"]["tool_calls"] == [
        {
            "tool_call_id": "c1",
            "name": "weather",
            "args": {"city": "Lisbon"},
            "extra": {"responses": {"id": "fc_c1", "status": "completed"}},
        }
    ]


async def _porto_needs_approval(context: Any, params: dict[str, Any], call_id: str) -> bool:
    return params.get("city") == "Porto"


def _approval_scenario(session: Any) -> ScriptedModel:
    """Three turns: a tool call that completes; one left waiting for an approval that
    never comes (the run stops between the call and its output); the user moves on."""
    model = ScriptedModel(
        [
            [call("c1", "weather", city="Lisbon")],
            [text("18C in Lisbon.")],
            [call("c2", "weather", city="Porto")],
            [text("Sorry, I never got that result.")],
        ]
    )
    tool = function_tool(_weather, name_override="weather", needs_approval=_porto_needs_approval)
    agent = Agent(name="helper", instructions="be brief", model=model, tools=[tool])

    async def scenario() -> None:
        done = await Runner.run(agent, "weather in Lisbon?", session=session, hooks=hooks_of(session))
        assert done.final_output == "18C in Lisbon." and not done.interruptions
        interrupted = await Runner.run(agent, "and Porto?", session=session, hooks=hooks_of(session))
        assert interrupted.interruptions  # the run stopped between the call and its output
        await Runner.run(agent, "hello?", session=session, hooks=hooks_of(session))

    asyncio.run(scenario())
    return model


def test_mem_3_interrupted_call_is_healed_at_the_next_user_turn(
    sqlite_service: Memory | AsyncMemory,
) -> None:
    session = FlowmemSession("s1", sqlite_service)
    model = _approval_scenario(session)
    seen = model.inputs[-1]  # what the model got for "hello?": accepted (sendable)
    assert [i.get("call_id") for i in seen if i.get("type") == "function_call"] == ["c1", "c2"]
    assert seen[-3:-1] == [
        {
            "id": "fc_c2",
            "type": "function_call",
            "call_id": "c2",
            "name": "weather",
            "arguments": '{"city": "Porto"}',
            "status": "completed",
        },
        {"type": "function_call_output", "call_id": "c2", "output": HEALED_CONTENT},
    ]
    rows = _rows(session)
    assert [r["role"] for r in rows] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "user",
        "assistant",
    ]
    assert rows[6]["metadata"] == {"tool_call_id": "c2", "healed": True}  # stored, next to its call
    assert check_sendable(rows) == []


def test_sdk_sqlite_session_silently_drops_the_interrupted_call(tmp_path: Path) -> None:
    """The contrast: with the SDK's own SQLite store the model never learns it asked."""
    session = SQLiteSession("s1", str(tmp_path / "sdk.db"))
    model = _approval_scenario(session)
    seen = model.inputs[-1]
    assert [i.get("call_id") for i in seen if i.get("type") == "function_call"] == ["c1"]
    assert all(i.get("call_id") != "c2" for i in seen)


def test_approved_call_resumes_with_its_real_output(sqlite_service: Memory | AsyncMemory) -> None:
    model = ScriptedModel([[call("c2", "weather", city="Porto")], [text("21C in Porto.")]])
    tool = function_tool(_weather, name_override="weather", needs_approval=True)
    agent = Agent(name="helper", instructions="be brief", model=model, tools=[tool])
    session = FlowmemSession("s1", sqlite_service)

    async def scenario() -> str:
        interrupted = await Runner.run(agent, "and Porto?", session=session, hooks=hooks_of(session))
        state = interrupted.to_state()
        state.approve(interrupted.interruptions[0])
        resumed = await Runner.run(agent, state, session=session, hooks=hooks_of(session))
        return str(resumed.final_output)

    assert asyncio.run(scenario()) == "21C in Porto."
    rows = _rows(session)
    assert [(r["role"], r["content"]) for r in rows][1:3] == [("assistant", ""), ("tool", "21C")]
    assert not any(r["metadata"].get("healed") for r in rows)


class Crash(Exception):
    """A tool failure that aborts the run."""


def _crashing(city: str) -> str:
    raise Crash(f"worker died looking up {city}")


def test_tool_crash_aborts_the_run_and_the_next_turn_still_runs(
    sqlite_service: Memory | AsyncMemory,
) -> None:
    model = ScriptedModel(
        [[call("c9", "weather", city="Porto")], [text("Let me try again later.")]]
    )
    tool = function_tool(_crashing, name_override="weather", failure_error_function=None)
    agent = Agent(name="helper", instructions="be brief", model=model, tools=[tool])
    session = FlowmemSession("s1", sqlite_service)

    async def scenario() -> str:
        with pytest.raises(UserError):
            await Runner.run(agent, "and Porto?", session=session, hooks=hooks_of(session))
        again = await Runner.run(agent, "hello?", session=session, hooks=hooks_of(session))
        return str(again.final_output)

    assert asyncio.run(scenario()) == "Let me try again later."
    assert check_sendable(_rows(session)) == []


def test_streamed_run_is_stored_too(service: Memory | AsyncMemory) -> None:
    model = ScriptedModel([[text("hi there")]])
    agent = Agent(name="helper", instructions="be brief", model=model)
    session = FlowmemSession("s1", service)

    async def scenario() -> None:
        streamed = Runner.run_streamed(agent, "hi", session=session, hooks=hooks_of(session))
        async for _ in streamed.stream_events():
            pass

    asyncio.run(scenario())
    user, answer = asyncio.run(session.get_items())
    assert user == {"role": "user", "content": "hi"}  # as the SDK added it, no key added
    assert answer["id"] == "msg_0" and answer["content"][0]["text"] == "hi there"


def test_mem_1_redelivered_function_call_output_is_stored_once(
    service: Memory | AsyncMemory, tmp_path: Path
) -> None:
    session = FlowmemSession("s1", service)

    async def scenario(target: Any) -> list[Any]:
        await target.add_items([USER_PORTO, CALL_ITEM])
        await target.add_items([OUTPUT_ITEM])
        await target.add_items([OUTPUT_ITEM])  # re-delivered after a retry
        return list(await target.get_items())

    items = asyncio.run(scenario(session))
    assert session.last_result is not None and session.last_result.appended == 0
    assert [i.get("type") for i in items].count("function_call_output") == 1
    sdk_items = asyncio.run(scenario(SQLiteSession("s1", str(tmp_path / "sdk.db"))))
    assert [i.get("type") for i in sdk_items].count("function_call_output") == 2


def test_mem_2_redelivered_model_turn_is_stored_once(service: Memory | AsyncMemory) -> None:
    session = FlowmemSession("s1", service)

    async def scenario() -> None:
        await session.add_items([USER_PORTO, CALL_ITEM])
        await session.add_items([CALL_ITEM])

    asyncio.run(scenario())
    assert len(_rows(session)) == 2


def test_mem_10_late_output_replaces_the_placeholder(service: Memory | AsyncMemory) -> None:
    session = FlowmemSession("s1", service)

    async def scenario() -> list[Any]:
        await session.add_items([USER_PORTO, CALL_ITEM])
        await session.add_items([{"role": "user", "content": "hello?"}])
        await session.add_items([OUTPUT_ITEM])
        return list(await session.get_items())

    items = asyncio.run(scenario())
    assert items[2] == OUTPUT_ITEM and len(items) == 4
    assert not any(r["metadata"].get("healed") for r in _rows(session))


def test_get_items_limit_is_the_last_items_exactly_as_sqlite_session_gives(
    service: Memory | AsyncMemory,
) -> None:
    """Issue 24 §5: a cut starting on an output was trimmed, so fewer than ``limit`` came back.

    The SDK's Runner drops such an output itself, and its session tests assert
    ``get_items(limit=2) == history[-2:]``.
    """
    session = FlowmemSession("s1", service)
    history = [USER_PORTO, CALL_ITEM, OUTPUT_ITEM, {"role": "assistant", "content": "21C"}]

    async def scenario() -> list[list[Any]]:
        await session.add_items(history)
        return [await session.get_items(limit=n) for n in (1, 2, 3, 0)]

    one, two, three, none = asyncio.run(scenario())
    assert one == history[-1:]
    assert two == history[-2:]  # begins with the output: as SQLiteSession, the Runner trims it
    assert three == history[-3:]
    assert none == []


def test_get_items_limit_is_the_tail_of_the_whole_repaired_history(
    service: Memory | AsyncMemory,
) -> None:
    """A late output is moved next to its call: the last N are those of the whole history."""
    session = FlowmemSession("s1", service)
    wait = {"role": "assistant", "content": "Still looking."}

    async def scenario() -> list[Any]:
        await session.add_items([USER_PORTO, CALL_ITEM])
        await session.add_items([wait])  # no user turn: the call stays open
        await session.add_items([OUTPUT_ITEM])  # stored last, read right after its call
        whole = await session.get_items()
        return [whole, *[await session.get_items(limit=n) for n in range(1, len(whole) + 2)]]

    whole, *tails = asyncio.run(scenario())
    assert whole == [USER_PORTO, CALL_ITEM, OUTPUT_ITEM, wait]
    assert tails == [whole[-n:] for n in range(1, len(whole) + 2)]


def test_pop_item_removes_the_last_item(service: Memory | AsyncMemory) -> None:
    session = FlowmemSession("s1", service)
    second = {**CALL_ITEM, "call_id": "c3"}

    async def scenario() -> list[Any]:
        await session.add_items(
            [USER_PORTO, {"role": "assistant", "content": "Looking."}, CALL_ITEM, second]
        )
        popped = [await session.pop_item() for _ in range(5)]
        return popped

    if isinstance(service, MemoryService):
        assert isinstance(service.store, SupportsPopLast)  # every backend has it
    popped = asyncio.run(scenario())
    assert popped == [
        second,
        CALL_ITEM,
        {"role": "assistant", "content": "Looking."},
        {"role": "user", "content": "and Porto?"},
        None,
    ]
    assert _rows(session) == []


def test_mem_13_a_session_without_a_usable_id_refuses(service: Memory | AsyncMemory) -> None:
    for bad in ("0", "not usable", ""):
        session = FlowmemSession(bad, service)

        async def scenario(target: FlowmemSession = session) -> list[Any]:
            await target.add_items([USER_PORTO])
            return [await target.get_items(), await target.pop_item()]

        assert asyncio.run(scenario()) == [[], None]
        assert session.last_result is not None and session.last_result.refusal is not None
    assert shared_of(service).load("global", "agent_items", None).messages == []


def test_every_item_is_kept_and_a_malformed_one_is_refused(service: Memory | AsyncMemory) -> None:
    session = FlowmemSession("s1", service)
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    image = {
        "role": "user",
        "content": [{"type": "input_image", "image_url": "https://x.example/a.png", "detail": "low"}],
    }
    asyncio.run(session.add_items([USER_PORTO, reasoning, {"role": "assistant", "content": "?"}]))
    asyncio.run(session.add_items([image]))
    assert asyncio.run(session.get_items()) == [
        USER_PORTO,
        reasoning,
        {"role": "assistant", "content": "?"},
        image,
    ]
    with pytest.raises(InvalidMessageError):  # a function_call without its call_id
        asyncio.run(session.add_items([USER_PORTO, {"type": "function_call", "name": "f"}]))
    assert len(_rows(session)) == 3  # nothing of the refused batch was written


def test_a_part_kept_verbatim_comes_back(service: Memory | AsyncMemory) -> None:
    session = FlowmemSession("s1", service)
    image = {"role": "user", "content": [{"type": "input_image", "image_url": "https://x/a.png"}]}
    asyncio.run(session.add_items([image]))
    assert asyncio.run(session.get_items()) == [image]


def test_window_and_clear(service: Memory | AsyncMemory) -> None:
    session = FlowmemSession("s1", service, max_messages=2)

    async def scenario() -> list[Any]:
        await session.add_items(
            [USER_PORTO, CALL_ITEM, OUTPUT_ITEM, {"role": "assistant", "content": "21C"}]
        )
        kept = await session.get_items()
        await session.clear_session()
        return [kept, await session.get_items()]

    kept, cleared = asyncio.run(scenario())
    assert kept == [{"role": "assistant", "content": "21C"}]
    assert cleared == []


def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agents", None)
    monkeypatch.delitem(sys.modules, "flowmem.integrations.openai_agents")
    with pytest.raises(ImportError, match=r"'openai-agents' extra, pip install '<checkout>\[openai-agents\]'"):
        import flowmem.integrations.openai_agents  # noqa: F401


class _StoreWithoutPopLast:
    """A store exposing only the buffer calls the service needs, without ``pop_last``."""

    def __init__(self) -> None:
        self._inner = MemoryStore()
        self.url = "memory://"
        self.append = self._inner.append
        self.load = self._inner.load
        self.count = self._inner.count
        self.clear = self._inner.clear
        self.get_session = self._inner.get_session  # reads check the session's owner


def test_pop_item_on_a_store_without_pop_last_is_a_typed_error() -> None:
    session = FlowmemSession("s1", MemoryService(_StoreWithoutPopLast()))  # type: ignore[arg-type]
    asyncio.run(session.add_items([USER_PORTO]))
    with pytest.raises(ConfigurationError, match="pop_last"):
        asyncio.run(session.pop_item())
    assert len(_rows(session)) == 1


def _no_thread(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a worker thread was asked for (asyncio.to_thread, InOrder.run)")


def _one_of_each(session: FlowmemSession) -> list[Any]:
    """Every session operation once, and what each gave; run with its own loop."""

    async def scenario() -> list[Any]:
        await session.add_items([USER_PORTO, CALL_ITEM])
        await session.add_items([OUTPUT_ITEM, OUTPUT_ITEM])  # re-delivered (MEM-1)
        got = [await session.get_items(), await session.get_items(limit=1)]
        popped = await session.pop_item()
        await session.clear_session()
        return [*got, popped, await session.get_items()]

    return asyncio.run(scenario())


def test_an_async_memory_is_awaited_on_the_loop_without_a_thread(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flowmem.client import AsyncClient

    awaited = remote_memory(request, kind="async-remote")
    assert isinstance(awaited, AsyncClient)
    session = FlowmemSession("s1", awaited)
    assert session.memory is awaited  # decided at construction: no adapter in between
    monkeypatch.setattr(asyncio, "to_thread", _no_thread)
    monkeypatch.setattr(InOrder, "run", _no_thread)  # InThread's calls (decision 0152)
    got = _one_of_each(session)
    assert got[0] == [USER_PORTO, CALL_ITEM, OUTPUT_ITEM] and got[2] == OUTPUT_ITEM
    model = ScriptedModel([[text("21C in Porto.")]])
    agent = Agent(name="helper", instructions="be brief", model=model)
    done = asyncio.run(Runner.run(agent, "and Porto?", session=session, hooks=hooks_of(session)))
    assert done.final_output == "21C in Porto." and len(_rows(session)) == 2
    # the same session over a synchronous memory does go through a worker thread
    threaded = FlowmemSession("s1", remote_memory(request, kind="remote"))
    with pytest.raises(AssertionError, match="worker thread"):
        asyncio.run(threaded.get_items())


def test_a_client_and_an_async_client_give_the_same_items_results_and_errors(
    request: pytest.FixtureRequest,
) -> None:
    sync = FlowmemSession("s1", remote_memory(request, kind="remote"), max_messages=3)
    # two users, two sessions: a session id belongs to the user who wrote it first
    awaited = FlowmemSession("s2", remote_memory(request, kind="async-remote"), max_messages=3)
    assert _one_of_each(sync) == _one_of_each(awaited)
    for session in (sync, awaited):
        asyncio.run(session.add_items([USER_PORTO, CALL_ITEM, OUTPUT_ITEM]))
    assert sync.last_result is not None and awaited.last_result is not None
    assert replace(awaited.last_result, resolved_scope_id="s1") == sync.last_result
    # two users' sessions, the same rows (window 3), but for when each was written
    assert _untimed(_rows(sync)) == _untimed(_rows(awaited))
    bad = [USER_PORTO, {"type": "function_call", "name": "f"}]
    errors = []
    for session in (sync, awaited):
        with pytest.raises(InvalidMessageError) as refused:
            asyncio.run(session.add_items(bad))
        errors.append((refused.value.code, str(refused.value)))
    assert errors[0] == errors[1]
    for bad_id in ("0", ""):  # MEM-13: the same refusal either way
        results = []
        for memory in (sync.service, awaited.service):
            refusing = FlowmemSession(bad_id, memory)
            asyncio.run(refusing.add_items([USER_PORTO]))
            results.append(refusing.last_result)
        assert results[0] == results[1] and results[0] is not None
        assert results[0].refusal is not None


def test_memory_with_some_operations_awaited_is_refused_at_construction() -> None:
    class Half(MemoryService):
        async def load(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            return super().load(*args, **kwargs)

    with pytest.raises(TypeError, match=r"awaits load but not read, write"):
        FlowmemSession("s1", Half(MemoryStore()))


def test_normalized_rows_needs_a_synchronous_memory(request: pytest.FixtureRequest) -> None:
    sync = FlowmemSession("s1", MemoryService(MemoryStore()))
    asyncio.run(sync.add_items([USER_PORTO]))
    assert [r["content"] for r in sync.normalized_rows()] == ["and Porto?"]
    awaited = FlowmemSession("s1", remote_memory(request, kind="async-remote"))
    with pytest.raises(TypeError, match=r"await session\.get_items\(\)"):
        awaited.normalized_rows()


def test_a_token_limit_in_the_session_settings_windows_get_items(
    service: Memory | AsyncMemory,
) -> None:
    """Issue 28: ``max_tokens`` keeps the newest items that fit, never an output without its call."""
    history = [USER_PORTO, CALL_ITEM, OUTPUT_ITEM, {"role": "assistant", "content": "21C " * 30}]
    writer = FlowmemSession("s1", service)
    asyncio.run(writer.add_items(history))
    narrow = FlowmemSession("s1", service, session_settings={"max_tokens": 40})
    wide = FlowmemSession("s1", service, session_settings=FlowmemSessionSettings(max_tokens=10_000))
    items = asyncio.run(narrow.get_items())
    assert items == history[-1:]  # the output alone would lead: cut with its call
    assert narrow.last_window is not None and narrow.last_window.cut_messages == 3
    assert asyncio.run(wide.get_items()) == asyncio.run(writer.get_items())
    assert wide.last_window is not None and wide.last_window.cut_messages == 0
    assert asyncio.run(narrow.get_items(limit=2)) == history[-2:]  # an explicit limit wins


def test_a_runs_plain_session_settings_overlay_flowmems_and_keep_the_token_budget() -> None:
    """A ``RunConfig(session_settings=SessionSettings(limit=3))`` over a ``FlowmemSession`` (the SDK resolves it)."""
    from agents.memory.session_settings import SessionSettings

    from flowmem.integrations.openai_agents import FlowmemSessionSettings

    mine = FlowmemSessionSettings(max_tokens=500)
    resolved = mine.resolve(SessionSettings(limit=3))
    assert isinstance(resolved, FlowmemSessionSettings)
    assert (resolved.limit, resolved.max_tokens) == (3, 500)
    assert mine.resolve(SessionSettings()) == mine
