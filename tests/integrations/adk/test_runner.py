"""ADK's ``Runner`` end to end on ``FlowmemSessionService``, with a scripted model.

A turn with a tool call is stored and read back as the runner produced it. After a
crash that left the model's call unanswered (the process died after storing it), the
next user turn is sent with the call and its healed answer (MEM-3): the request is
sendable and keeps the call. ADK's own services send that turn without the call (it
drops unanswered calls when it builds the request), which the contrast test shows.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("google.adk")

from google.adk.events import Event
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.genai import types

from flowmem.core import HEALED_CONTENT
from flowmem.integrations.adk import FlowmemSessionService
from flowmem.integrations.adk.events import HEALED_PREFIX
from tests.integrations.adk.scripted import APP, ScriptedLlm, agent, asks_tool, message, says


def _turn(runner: Runner, session_id: str, text: str) -> list[Event]:
    async def go() -> list[Event]:
        return [
            event
            async for event in runner.run_async(
                user_id="alice", session_id=session_id, new_message=message(text)
            )
        ]

    return asyncio.run(go())


def _runner(service: Any, model: ScriptedLlm) -> Runner:
    return Runner(app_name=APP, agent=agent(model), session_service=service)


def _session(service: Any, session_id: str) -> Any:
    return asyncio.run(service.get_session(app_name=APP, user_id="alice", session_id=session_id))


def _crashed_session(service: Any) -> str:
    """A session whose last turn's tool call was stored but never answered (a crash)."""
    model = ScriptedLlm(script=[asks_tool("shoes")])
    runner = _runner(service, model)
    session = asyncio.run(service.create_session(app_name=APP, user_id="alice"))

    async def crash() -> None:
        async for event in runner.run_async(
            user_id="alice", session_id=session.id, new_message=message("find shoes")
        ):
            if event.get_function_calls():
                return  # the process dies here: the call is stored, its answer never is

    asyncio.run(crash())
    return str(session.id)


def test_a_runner_turn_with_a_tool_call_is_stored_and_read_back_as_the_runner_made_it(
    flowmem_service: FlowmemSessionService,
) -> None:
    model = ScriptedLlm(script=[asks_tool("shoes"), says("There are 2 pairs.")])
    runner = _runner(flowmem_service, model)
    session = asyncio.run(flowmem_service.create_session(app_name=APP, user_id="alice"))
    produced = _turn(runner, session.id, "find shoes")
    stored = _session(flowmem_service, session.id).events
    assert [e.author for e in stored] == ["user", "assistant", "assistant", "assistant"]
    assert stored[1:] == produced
    assert stored[2].get_function_responses()[0].response == {"found": "2 results for shoes"}
    second = model.requests[1].contents
    assert [bool(p.function_call) for p in second[1].parts] == [True]
    assert [bool(p.function_response) for p in second[2].parts] == [True]


def test_mem_3_after_a_crash_the_next_turn_sends_the_call_with_its_healed_answer(
    flowmem_service: FlowmemSessionService,
) -> None:
    sid = _crashed_session(flowmem_service)
    model = ScriptedLlm(script=[says("Sorry, the search was lost; trying again.")])
    _turn(_runner(flowmem_service, model), sid, "anything?")
    sent = model.requests[0].contents
    assert [c.role for c in sent] == ["user", "model", "user", "user"]
    (call,) = [p.function_call for p in sent[1].parts if p.function_call]
    (healed,) = [p.function_response for p in sent[2].parts if p.function_response]
    assert healed.name == call.name == "lookup"
    assert healed.response == {"error": HEALED_CONTENT}
    assert sent[3].parts[0].text == "anything?"
    stored = _session(flowmem_service, sid).events
    assert [e.id.startswith(HEALED_PREFIX) for e in stored] == [False, False, True, False, False]


def test_adk_in_memory_service_sends_the_turn_after_a_crash_without_the_call() -> None:
    """The contrast: ADK's own services keep the call stored, and drop it from the request."""
    service = InMemorySessionService()
    sid = _crashed_session(service)
    model = ScriptedLlm(script=[says("What were we doing?")])
    _turn(_runner(service, model), sid, "anything?")
    sent = model.requests[0].contents
    assert not any(p.function_call for c in sent for p in c.parts or [])
    assert any(e.get_function_calls() for e in _session(service, sid).events)


def test_a_runner_on_a_stale_session_object_raises_stale_session_error(
    flowmem_service: FlowmemSessionService,
) -> None:
    from google.adk.errors import StaleSessionError

    session = asyncio.run(flowmem_service.create_session(app_name=APP, user_id="alice"))
    _turn(_runner(flowmem_service, ScriptedLlm(script=[says("hi")])), session.id, "hello")
    event = Event(
        invocation_id="late",
        author="user",
        content=types.Content(role="user", parts=[types.Part(text="from an old copy")]),
    )
    with pytest.raises(StaleSessionError):
        asyncio.run(flowmem_service.append_event(session, event))
