"""Write-ahead at tool boundaries with the SDK's own ``Runner`` (issue 36; DESIGN §5; decision 0098).

With ``FlowmemRunHooks`` a model response that leads to a tool is stored before the
tool starts, and the SDK's own save of it after the tool is not stored again; the
SDK's ``SQLiteSession`` runs the same operations side by side. ``service`` runs
each test in process (memory, SQLite), over a ``Client`` of a real server and over an
``AsyncClient`` of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agents import (
    Agent,
    GuardrailFunctionOutput,
    InputGuardrail,
    InputGuardrailTripwireTriggered,
    RunHooks,
    Runner,
    SQLiteSession,
    function_tool,
    set_tracing_disabled,
)
from agents.items import ModelResponse
from agents.models.fake_id import FAKE_RESPONSES_ID
from agents.run_context import RunContextWrapper
from agents.usage import Usage

from flowmem.integrations.openai_agents import FlowmemRunHooks, FlowmemSession, WriteAheadWarning
from flowmem.memory import AsyncMemory, Memory
from flowmem.service import MemoryService
from flowmem.store import MemoryStore, open_store
from tests.integrations.backends import ASYNC_REMOTES, REMOTES, SERVERS, remote_memory, sync_of
from tests.integrations.scripted_model import ScriptedModel, call, text
from tests.integrations.session_contract import as_json, hooks_of

set_tracing_disabled(True)

QUESTION = "weather in Lisbon?"
AGAIN = "still there?"


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


@pytest.fixture(params=["memory", "sqlite"])
def local_service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    """In process only: for what the wire does not change (each memory runs the same code)."""
    store = (
        MemoryStore()
        if request.param == "memory"
        else open_store(f"sqlite:///{tmp_path / 'agents.db'}")
    )
    yield MemoryService(store)
    store.close()


def _rows(session: FlowmemSession) -> list[dict[str, Any]]:
    return sync_of(session.service).load(session.scope, session.key, session.context).messages


def _agent(
    model: ScriptedModel, seen: list[list[Any]], session: Any, ran: asyncio.Event | None = None
) -> Agent[Any]:
    """An agent whose ``weather`` tool records what its session holds when it starts (then sets ``ran``)."""

    async def weather(city: str) -> str:
        seen.append(as_json(await session.get_items()))
        if ran is not None:
            ran.set()
        return {"Lisbon": "18C", "Porto": "21C"}.get(city, "unknown")

    tool = function_tool(weather, name_override="weather")
    return Agent(name="helper", instructions="be brief", model=model, tools=[tool])


async def _run(agent: Agent[Any], text_in: str, session: Any, streamed: bool) -> Any:
    if not streamed:
        return await Runner.run(agent, text_in, session=session, hooks=hooks_of(session))
    result = Runner.run_streamed(agent, text_in, session=session, hooks=hooks_of(session))
    async for _ in result.stream_events():
        pass
    return result


def _one_call_script() -> ScriptedModel:
    return ScriptedModel(
        [[text("Checking.", 1), call("c1", "weather", city="Lisbon")], [text("18C in Lisbon.", 2)]]
    )


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
def test_mem_2_the_call_is_stored_before_its_tool_runs_and_once(
    service: Memory | AsyncMemory, tmp_path: Path, streamed: bool
) -> None:
    """Inside the tool the session already holds the call; after the run, what SQLiteSession holds."""
    ours = FlowmemSession("s1", service)
    sdk = SQLiteSession("s1", str(tmp_path / "sdk.db"))
    seen_ours: list[list[Any]] = []
    seen_sdk: list[list[Any]] = []
    asyncio.run(_run(_agent(_one_call_script(), seen_ours, ours), QUESTION, ours, streamed))
    asyncio.run(_run(_agent(_one_call_script(), seen_sdk, sdk), QUESTION, sdk, streamed))
    (inside_ours,), (inside_sdk,) = seen_ours, seen_sdk
    assert [i.get("type", "message") for i in inside_ours][:3] == ["message", "message", "function_call"]
    assert inside_ours[2]["call_id"] == "c1"  # stored ahead (it reads as interrupted until its output)
    assert inside_sdk == [{"role": "user", "content": QUESTION}]  # the SDK's store: not yet
    items, sdk_items = asyncio.run(ours.get_items()), asyncio.run(sdk.get_items())
    assert as_json(items) == as_json(sdk_items)  # the SDK's save after the tool stored nothing twice
    assert [r["role"] for r in _rows(ours)] == ["user", "assistant", "tool", "assistant"]


def test_mem_1_parallel_tools_start_after_the_one_write_of_their_calls(
    service: Memory | AsyncMemory, tmp_path: Path
) -> None:
    """Two calls in one response: both tools start with both calls stored; each output stored once."""

    def script() -> ScriptedModel:
        return ScriptedModel(
            [
                [call("c1", "weather", city="Lisbon"), call("c2", "weather", city="Porto")],
                [text("18C and 21C.", 2)],
            ]
        )

    ours = FlowmemSession("s1", service)
    sdk = SQLiteSession("s1", str(tmp_path / "sdk.db"))
    seen: list[list[Any]] = []
    asyncio.run(_run(_agent(script(), seen, ours), QUESTION, ours, streamed=False))
    asyncio.run(_run(_agent(script(), [], sdk), QUESTION, sdk, streamed=False))
    assert len(seen) == 2
    for inside in seen:
        assert {i.get("call_id") for i in inside if i.get("type") == "function_call"} == {"c1", "c2"}
    assert as_json(asyncio.run(ours.get_items())) == as_json(asyncio.run(sdk.get_items()))
    assert [r["role"] for r in _rows(ours)] == ["user", "assistant", "tool", "tool", "assistant"]


class Killed(BaseException):
    """Stands in for a SIGKILL inside the tool: nothing of the run goes on."""


def _killed_then_again(session_of: Any) -> list[Any]:
    """A run whose tool is killed, then a new session object (a new process) and a new message."""
    killed_model = ScriptedModel([[call("c1", "weather", city="Lisbon")]])

    def weather(city: str) -> str:
        raise Killed

    tool = function_tool(weather, name_override="weather")
    first = session_of()
    agent = Agent(name="helper", instructions="be brief", model=killed_model, tools=[tool])
    with pytest.raises(Killed):
        asyncio.run(Runner.run(agent, QUESTION, session=first, hooks=hooks_of(first)))
    again_model = ScriptedModel([[text("Yes.", 3)]])
    second = session_of()
    again = Agent(name="helper", instructions="be brief", model=again_model, tools=[tool])
    asyncio.run(Runner.run(again, AGAIN, session=second, hooks=hooks_of(second)))
    return again_model.inputs[0]


def test_mem_3_a_call_whose_tool_was_killed_reaches_the_next_model_call_healed(
    service: Memory | AsyncMemory, tmp_path: Path
) -> None:
    """The issue's case: SQLiteSession's next input is two user messages; flowmem's keeps the call."""
    given = _killed_then_again(lambda: FlowmemSession("s1", service))
    sdk_given = _killed_then_again(lambda: SQLiteSession("s1", str(tmp_path / "sdk.db")))
    assert [i.get("type", i.get("role")) for i in given] == [
        "user",
        "function_call",
        "function_call_output",
        "user",
    ]
    assert given[2]["call_id"] == "c1"  # MEM-3's placeholder, right after its call
    assert sdk_given == [{"role": "user", "content": QUESTION}, {"role": "user", "content": AGAIN}]


def test_a_run_without_the_hooks_warns_once_naming_them(service: Memory | AsyncMemory) -> None:
    session = FlowmemSession("s1", service)
    model = ScriptedModel(
        [[call("c1", "weather", city="Lisbon")], [text("18C.")], [call("c2", "weather", city="Porto")], [text("21C.")]]
    )
    agent = _agent(model, [], session)

    async def two_runs() -> None:
        await Runner.run(agent, QUESTION, session=session)
        await Runner.run(agent, "and Porto?", session=session)

    with pytest.warns(WriteAheadWarning, match=r"hooks=FlowmemRunHooks\(session\)") as caught:
        asyncio.run(two_runs())
    assert len([w for w in caught if issubclass(w.category, WriteAheadWarning)]) == 1
    assert [r["role"] for r in _rows(session)] == ["user", "assistant", "tool", "assistant"] * 2


def test_items_added_directly_or_by_a_run_with_the_hooks_do_not_warn(
    local_service: Memory,
) -> None:
    session = FlowmemSession("s1", local_service)
    with warnings.catch_warnings():
        warnings.simplefilter("error", WriteAheadWarning)
        asyncio.run(
            session.add_items(
                [
                    {"role": "user", "content": "and Porto?"},
                    {"type": "function_call", "call_id": "c9", "name": "weather", "arguments": "{}"},
                ]
            )
        )
        asyncio.run(_run(_agent(_one_call_script(), [], session), QUESTION, session, streamed=True))


def _response(*output: Any) -> ModelResponse:
    return ModelResponse(output=list(output), usage=Usage(), response_id=None)


def test_mem_2_a_new_process_resaving_a_written_ahead_turn_stores_it_once(
    service: Memory | AsyncMemory,
) -> None:
    """What one session stored ahead, another (a resumed run state elsewhere) saves again: once.

    Its message and reasoning items are recognised by their provider ids in the stored
    rows of the turn, its call by MEM-2, its output is new.
    """
    first = FlowmemSession("s1", service)
    hooks = FlowmemRunHooks(first)
    ctx: RunContextWrapper[Any] = RunContextWrapper(context=None)
    message, function_call = text("Checking.", 7), call("c1", "weather", city="Lisbon")

    async def write_ahead() -> None:
        await first.add_items([{"role": "user", "content": QUESTION}])
        await hooks.on_llm_end(ctx, None, _response(message, function_call))
        await hooks.on_tool_start(ctx, None, None)

    asyncio.run(write_ahead())
    assert [r["role"] for r in _rows(first)] == ["user", "assistant"]
    second = FlowmemSession("s1", service)
    resaved = [
        message.model_dump(exclude_unset=True),
        function_call.model_dump(exclude_unset=True),
        {"type": "function_call_output", "call_id": "c1", "output": "18C"},
    ]
    asyncio.run(second.add_items(resaved))
    assert [r["role"] for r in _rows(second)] == ["user", "assistant", "tool"]
    assert as_json(asyncio.run(second.get_items()))[1:] == resaved


def test_a_message_without_a_provider_id_is_never_taken_for_a_stored_one(
    local_service: Memory,
) -> None:
    """Two equal messages with the SDK's fake id (a Chat Completions model) are two messages."""
    fake = {
        "id": FAKE_RESPONSES_ID,
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Ok.", "annotations": []}],
    }
    asyncio.run(FlowmemSession("s1", local_service).add_items([{"role": "user", "content": "hi"}, fake]))
    asyncio.run(FlowmemSession("s1", local_service).add_items([fake]))
    assert len(_rows(FlowmemSession("s1", local_service))) == 3


class _Recorder(RunHooks):
    def __init__(self) -> None:
        self.events: list[str] = []

    async def on_agent_start(self, context: Any, agent: Any) -> None:
        self.events.append("agent_start")

    async def on_llm_start(self, context: Any, agent: Any, system_prompt: Any, input_items: Any) -> None:
        self.events.append("llm_start")

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        self.events.append("llm_end")

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        self.events.append("tool_start")

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        self.events.append("tool_end")

    async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
        self.events.append("agent_end")


def test_your_own_run_hooks_are_called_too() -> None:
    session = FlowmemSession("s1", MemoryService(MemoryStore()))
    mine = _Recorder()
    agent = _agent(_one_call_script(), [], session)
    asyncio.run(Runner.run(agent, QUESTION, session=session, hooks=FlowmemRunHooks(session, mine)))
    assert mine.events == [
        "agent_start",
        "llm_start",
        "llm_end",
        "tool_start",
        "tool_end",
        "llm_start",
        "llm_end",
        "agent_end",
    ]


def test_the_hooks_need_the_flowmem_session_and_run_hooks(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"needs the FlowmemSession the run is given"):
        FlowmemRunHooks(SQLiteSession("s1", str(tmp_path / "sdk.db")))
    with pytest.raises(TypeError, match=r"hooks must be the SDK's RunHooks"):
        FlowmemRunHooks(FlowmemSession("s1", MemoryService(MemoryStore())), object())  # type: ignore[arg-type]


def test_a_closed_session_stops_the_run_before_the_tool() -> None:
    """As every other call of a closed session: RuntimeError, and the tool never runs."""
    session = FlowmemSession("s1", MemoryService(MemoryStore()))
    seen: list[list[Any]] = []
    agent = _agent(_one_call_script(), seen, session)
    hooks = FlowmemRunHooks(session)

    async def run() -> None:
        await hooks.on_llm_end(RunContextWrapper(context=None), agent, _response(call("c1", "weather")))
        session.close()
        await hooks.on_tool_start(RunContextWrapper(context=None), agent, None)

    with pytest.raises(RuntimeError, match="closed"):
        asyncio.run(run())
    assert seen == []


def test_mem_3_a_tool_run_before_a_tripped_input_guardrail_keeps_its_call(
    local_service: Memory, tmp_path: Path
) -> None:
    """The SDK runs the step's tool while a parallel input guardrail is still deciding; it trips.

    The SDK's own session keeps only the question: the next model input never shows a
    tool ran. flowmem stored the call before the tool started, so the next user message
    heals it (MEM-3): a deliberate difference (docs/integrations.md). The guardrail
    decides once the tool has run, not after a fixed delay: a guardrail that trips first
    cancels the step before its tool (a loaded machine took over 50 ms to reach it).
    """

    def run(session: Any) -> tuple[list[list[Any]], list[Any]]:
        seen: list[list[Any]] = []
        ran = asyncio.Event()

        async def refuse(context: Any, agent: Any, given: Any) -> GuardrailFunctionOutput:
            with contextlib.suppress(TimeoutError):  # a tool that never runs fails the test below
                await asyncio.wait_for(ran.wait(), timeout=60)
            return GuardrailFunctionOutput(output_info=None, tripwire_triggered=True)

        agent = _agent(_one_call_script(), seen, session, ran)
        agent.input_guardrails = [InputGuardrail(guardrail_function=refuse)]
        with pytest.raises(InputGuardrailTripwireTriggered):
            asyncio.run(Runner.run(agent, QUESTION, session=session, hooks=hooks_of(session)))
        again = Agent(name="helper", instructions="be brief", model=ScriptedModel([[text("Hi.", 5)]]))
        asyncio.run(Runner.run(again, AGAIN, session=session, hooks=hooks_of(session)))
        return seen, as_json(asyncio.run(session.get_items()))

    seen, ours = run(FlowmemSession("s1", local_service))
    sdk_seen, sdk = run(SQLiteSession("s1", str(tmp_path / "sdk.db")))
    assert len(seen) == len(sdk_seen) == 1  # the tool ran either way
    assert [i.get("call_id") for i in seen[0] if i.get("type") == "function_call"] == ["c1"]
    assert [i.get("type", i.get("role")) for i in ours] == [
        "user",
        "message",
        "function_call",
        "function_call_output",
        "user",
        "message",
    ]
    assert [i.get("type", i.get("role")) for i in sdk] == ["user", "user", "message"]


class _HeldTurn(MemoryService):
    """A ``MemoryService`` whose append of a model turn waits for ``release`` (the seam)."""

    def __init__(self) -> None:
        super().__init__(MemoryStore())
        self.turn_entered = threading.Event()
        self.other_started = threading.Event()
        self.release = threading.Event()

    def append(self, scope: str, key: str, messages: Any, *args: Any, **kwargs: Any) -> Any:
        """Hold a model turn's append until released; note any other append that starts meanwhile."""
        if any(m.get("role") == "assistant" for m in messages):
            self.turn_entered.set()
            self.release.wait(30)
        elif self.turn_entered.is_set():
            self.other_started.set()
        return super().append(scope, key, messages, *args, **kwargs)


def test_mem_3_a_write_ahead_whose_run_was_cancelled_is_stored_before_the_next_message() -> None:
    """The run is cancelled (a tripped guardrail, a timeout) while its call is being stored ahead.

    The write goes on in its thread; the next user message waits for it, so the call
    precedes the message and is answered as interrupted (MEM-3) rather than stored after
    the message it never belonged to.
    """
    service = _HeldTurn()
    session = FlowmemSession("s1", service)
    hooks = FlowmemRunHooks(session)
    ctx: RunContextWrapper[Any] = RunContextWrapper(context=None)

    async def scenario() -> None:
        await session.add_items([{"role": "user", "content": QUESTION}])
        await hooks.on_llm_end(ctx, None, _response(call("c1", "weather", city="Lisbon")))
        step = asyncio.create_task(hooks.on_tool_start(ctx, None, None))
        await asyncio.to_thread(service.turn_entered.wait, 30)
        step.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await step
        again = asyncio.create_task(session.add_items([{"role": "user", "content": AGAIN}]))
        await asyncio.to_thread(service.other_started.wait, 0.5)  # it must not start meanwhile
        service.release.set()
        await again

    asyncio.run(scenario())
    assert [r["role"] for r in _rows(session)] == ["user", "assistant", "tool", "user"]
    items = as_json(asyncio.run(session.get_items()))
    assert [i.get("type", i.get("role")) for i in items] == [
        "user",
        "function_call",
        "function_call_output",
        "user",
    ]
