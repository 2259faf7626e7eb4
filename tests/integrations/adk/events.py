"""Events the ADK tests append: ids and times fixed, so two services can be compared exactly."""

from __future__ import annotations

from typing import Any

from google.adk.events import Event, EventActions
from google.genai import types

T0 = 1_760_000_100.0


def user(text: str, n: int, **fields: Any) -> Event:
    """A user message, event ``n``."""
    return Event(
        id=f"e{n}",
        invocation_id=fields.pop("invocation_id", f"inv-{n}"),
        author="user",
        timestamp=T0 + n,
        content=types.Content(role="user", parts=[types.Part(text=text)]),
        **fields,
    )


def call(call_id: str, n: int, name: str = "lookup", **fields: Any) -> Event:
    """A model turn calling tool ``name`` with id ``call_id``, event ``n``."""
    return Event(
        id=f"e{n}",
        invocation_id=fields.pop("invocation_id", f"inv-{n}"),
        author="agent",
        timestamp=T0 + n,
        content=types.Content(
            role="model",
            parts=[
                types.Part(
                    function_call=types.FunctionCall(id=call_id, name=name, args={"q": call_id}),
                    thought_signature=b"sig-" + call_id.encode(),
                )
            ],
        ),
        **fields,
    )


def result(call_id: str, n: int, name: str = "lookup", **fields: Any) -> Event:
    """The tool's answer to ``call_id``, event ``n``."""
    return Event(
        id=f"e{n}",
        invocation_id=fields.pop("invocation_id", f"inv-{n}"),
        author="agent",
        timestamp=T0 + n,
        content=types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id=call_id, name=name, response={"answer": call_id.upper()}
                    )
                )
            ],
        ),
        **fields,
    )


def answer(text: str, n: int, **fields: Any) -> Event:
    """A model's text answer, event ``n``."""
    return Event(
        id=f"e{n}",
        invocation_id=fields.pop("invocation_id", f"inv-{n}"),
        author="agent",
        timestamp=T0 + n,
        content=types.Content(role="model", parts=[types.Part(text=text)]),
        **fields,
    )


def state(delta: dict[str, Any], n: int) -> Event:
    """An event with no content that only changes state, event ``n``."""
    return Event(
        id=f"e{n}",
        invocation_id=f"inv-{n}",
        author="agent",
        timestamp=T0 + n,
        actions=EventActions(state_delta=delta),
    )


def rich(n: int) -> Event:
    """An event using every kind of field an event holds (the lossless round trip)."""
    return Event(
        id=f"e{n}",
        invocation_id="inv-rich",
        author="researcher",
        branch="root.researcher",
        timestamp=T0 + n + 0.123456789,
        turn_complete=True,
        custom_metadata={"trace": {"span": [1, 2.5, None, True]}, "tag": "ü"},
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=12, candidates_token_count=3, total_token_count=15
        ),
        content=types.Content(
            role="model",
            parts=[
                types.Part(text="thinking about it", thought=True, thought_signature=b"\x00\xffsig"),
                types.Part(text="Here is a picture:"),
                types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG\r\n\x00\xff")),
                types.Part(file_data=types.FileData(mime_type="application/pdf", file_uri="gs://b/doc.pdf")),
                types.Part(text=""),
                types.Part(
                    function_call=types.FunctionCall(id="rich-call", name="draw", args={"size": [1, 2]}),
                    thought_signature=b"\x01call",
                ),
            ],
        ),
        actions=EventActions(
            state_delta={"seen": ["a", "b"], "app:version": 3},
            artifact_delta={"chart.png": 2},
            transfer_to_agent="writer",
            skip_summarization=True,
        ),
        long_running_tool_ids={"rich-call"},
    )
