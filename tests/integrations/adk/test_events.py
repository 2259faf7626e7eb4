"""ADK events as flowmem rows and back (``flowmem.integrations.adk.events``): exact, and readable.

Every kind of event ADK stores comes back equal, through the rows' JSON as a store
keeps it; the rows are what flowmem's rules and API read: text as text, answers as
``tool`` rows keyed by their call id, calls declared on the model's row.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("google.adk")

from google.adk.events import Event, EventActions
from google.genai import types

from flowmem.core import prepare
from flowmem.integrations.adk.events import NO_CONTENT, event_rows, events_of
from tests.integrations.adk.events import T0, answer, call, result, rich, state, user


def _two_answers() -> Event:
    return Event(
        id="two",
        invocation_id="inv",
        author="agent",
        timestamp=T0,
        content=types.Content(
            role="user",
            parts=[
                types.Part(text="before"),
                *result("c1", 1).content.parts,
                types.Part(text="between"),
                *result("c2", 1).content.parts,
            ],
        ),
        actions=EventActions(state_delta={"k": [1, 2]}),
    )


EVENTS = {
    "user": user("hello", 1),
    "call": call("c1", 2),
    "result": result("c1", 3),
    "answer": answer("done", 4),
    "state only": state({"a": 1, "app:b": {"c": None}}, 5),
    "rich": rich(6),
    "two answers": _two_answers(),
    "no parts": Event(id="np", author="agent", invocation_id="i", content=types.Content(role="model")),
    "empty parts": Event(id="ep", author="agent", invocation_id="i", content=types.Content(role="model", parts=[])),
    "empty text": Event(id="et", author="user", invocation_id="i", content=types.Content(role="user", parts=[types.Part(text="")])),
    "call without id": Event(
        id="cw",
        author="agent",
        invocation_id="i",
        content=types.Content(role="model", parts=[types.Part(function_call=types.FunctionCall(name="f"))]),
    ),
    "error": Event(id="er", author="agent", invocation_id="i", error_code="INVOCATION_ABORTED", error_message="gone", interrupted=True),
    "output": Event(id="out", author="node", invocation_id="i", output={"rows": [1, "two"]}, node_path="wf/step@1"),
}


@pytest.mark.parametrize("name", sorted(EVENTS))
def test_an_event_comes_back_equal_from_its_stored_rows(name: str) -> None:
    event = EVENTS[name]
    rows = prepare(event_rows(event, "token"))
    stored = json.loads(json.dumps(rows))  # what a store keeps: JSON text
    assert events_of(stored) == [event]


def test_the_rows_are_text_answers_and_calls_as_flowmem_reads_them() -> None:
    rows = [event_rows(e, e.id)[0] for e in (user("hello", 1), call("c1", 2), result("c1", 3), state({"a": 1}, 4))]
    assert [(r["role"], r["content"]) for r in rows[:1]] == [("user", "hello")]
    assert rows[1]["metadata"]["tool_calls"] == [{"tool_call_id": "c1", "name": "lookup", "args": {"q": "c1"}}]
    assert rows[1]["content"][0]["block"]["thought_signature"]  # kept verbatim (base64)
    assert rows[2]["metadata"]["tool_call_id"] == "c1"
    assert rows[3]["role"] == "assistant" and rows[3]["content"] == [NO_CONTENT]


def test_an_event_answering_two_calls_is_a_tool_row_per_answer_other_parts_on_the_first() -> None:
    rows = event_rows(_two_answers(), "t")
    assert [(r["role"], r["metadata"]["tool_call_id"], r["metadata"]["adk"]["parts"]) for r in rows] == [
        ("tool", "c1", [0, 1, 2]),
        ("tool", "c2", [3]),
    ]


def test_a_long_running_call_is_not_declared_so_nothing_heals_it() -> None:
    waiting = call("c9", 1)
    waiting.long_running_tool_ids = {"c9"}
    assert "tool_calls" not in event_rows(waiting, "t")[0]["metadata"]
