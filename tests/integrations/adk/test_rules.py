"""The buffer rules on ADK events: MEM-1, MEM-2, MEM-3 and MEM-10, stored and in the session.

Every test runs on memory, SQLite and PostgreSQL, and checks both what a fresh
``get_session`` reads and the session object ``append_event`` updated in place (the
one ADK's runner builds its next model request from): the two must agree.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("google.adk")

from google.adk.events import Event, EventActions
from google.genai import types

from flowmem.core import HEALED_CONTENT
from flowmem.integrations.adk import FlowmemSessionService
from flowmem.integrations.adk.events import HEALED_MARK, HEALED_PREFIX
from flowmem.store.adk import EVENTS_KEY
from tests.integrations.adk.events import T0, answer, call, result, user

APP, USER, SID = "app", "u1", "s-rules"


def _ids(events: list[Event]) -> list[str]:
    return [e.id for e in events]


def _play(service: FlowmemSessionService, events: list[Event]) -> tuple[Any, Any]:
    """Append ``events`` to a new session; return (the session appended to, a fresh read)."""

    async def go() -> tuple[Any, Any]:
        session = await service.create_session(app_name=APP, user_id=USER, session_id=SID)
        for event in events:
            await service.append_event(session, event)
        read = await service.get_session(app_name=APP, user_id=USER, session_id=SID)
        return session, read

    return asyncio.run(go())


def _rows(service: FlowmemSessionService) -> list[dict[str, Any]]:
    return service.memory.store.load(("session", SID, EVENTS_KEY))


def test_mem_1_a_second_answer_to_an_answered_call_is_not_stored_nor_its_state(
    flowmem_service: FlowmemSessionService,
) -> None:
    again = result("c1", 4)
    again.actions = EventActions(state_delta={"answers": 2})
    session, read = _play(
        flowmem_service,
        [user("go", 1), call("c1", 2), result("c1", 3), again, answer("done", 5)],
    )
    assert _ids(read.events) == ["e1", "e2", "e3", "e5"]
    assert read.events == session.events
    assert "answers" not in read.state and "answers" not in session.state
    assert [r["role"] for r in _rows(flowmem_service)] == ["user", "assistant", "tool", "assistant"]


def test_mem_1_an_event_answering_two_calls_keeps_only_the_new_answer(
    flowmem_service: FlowmemSessionService,
) -> None:
    both = Event(
        id="e5",
        invocation_id="inv",
        author="agent",
        timestamp=T0 + 5,
        content=types.Content(role="user", parts=[*result("c1", 5).content.parts, *result("c2", 5).content.parts]),
    )
    two_calls = call("c1", 2)
    two_calls.content.parts.append(call("c2", 2).content.parts[0])
    session, read = _play(flowmem_service, [user("go", 1), two_calls, result("c1", 3), both])
    assert _ids(read.events) == ["e1", "e2", "e3", "e5"]
    kept = read.events[-1]
    assert [p.function_response.id for p in kept.content.parts] == ["c2"]
    assert read.events == session.events


def test_mem_2_a_model_turn_declaring_only_known_calls_is_not_stored(
    flowmem_service: FlowmemSessionService,
) -> None:
    session, read = _play(flowmem_service, [user("go", 1), call("c1", 2), call("c1", 3), result("c1", 4)])
    assert _ids(read.events) == ["e1", "e2", "e4"]
    assert read.events == session.events


def _healed(call_id: str, of: Event) -> Event:
    return Event(
        id=HEALED_PREFIX + call_id,
        invocation_id=of.invocation_id,
        author=of.author,
        timestamp=of.timestamp,
        content=types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id=call_id, name="lookup", response={"error": HEALED_CONTENT}
                    )
                )
            ],
        ),
        custom_metadata={HEALED_MARK: True},
    )


def test_mem_3_a_user_message_after_an_unanswered_call_is_preceded_by_a_placeholder_next_to_the_call(
    flowmem_service: FlowmemSessionService,
) -> None:
    crashed = call("c1", 2)
    session, read = _play(
        flowmem_service, [user("go", 1), crashed, answer("sorry, lost it", 3), user("try again", 4)]
    )
    # the placeholder sits right after the call, not at the end (the spec's worked example)
    assert _ids(read.events) == ["e1", "e2", HEALED_PREFIX + "c1", "e3", "e4"]
    assert read.events[2] == _healed("c1", crashed)
    assert read.events == session.events  # the runner's next request has it too
    rows = _rows(flowmem_service)
    assert rows[2]["metadata"] == {"tool_call_id": "c1", "healed": True}
    assert rows[2]["content"] == HEALED_CONTENT


def test_mem_3_only_a_user_message_heals_and_long_running_calls_are_left_waiting(
    flowmem_service: FlowmemSessionService,
) -> None:
    waiting = call("c2", 4, name="approve")
    waiting.long_running_tool_ids = {"c2"}
    session, read = _play(
        flowmem_service,
        [user("go", 1), call("c1", 2), answer("still thinking", 3), waiting, user("ok?", 5)],
    )
    assert _ids(read.events) == ["e1", "e2", HEALED_PREFIX + "c1", "e3", "e4", "e5"]
    assert read.events == session.events


def test_mem_10_a_late_real_answer_replaces_the_placeholder_in_place(
    flowmem_service: FlowmemSessionService,
) -> None:
    session, read = _play(
        flowmem_service,
        [user("go", 1), call("c1", 2), user("hello?", 3), result("c1", 4), answer("here", 5)],
    )
    assert _ids(read.events) == ["e1", "e2", "e4", "e3", "e5"]
    assert read.events[2] == result("c1", 4)
    assert read.events == session.events
    assert not any(r["metadata"].get("healed") for r in _rows(flowmem_service))
