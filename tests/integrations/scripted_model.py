"""A scripted ``agents`` Model for tests: replays outputs and refuses unsendable input."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from flowmem.core import check_sendable
from flowmem.formats import from_responses


class ProviderRejected(Exception):
    """What a provider answers (a 400) to a history with an unanswered call."""


def text(content: str, n: int = 0) -> ResponseOutputMessage:
    """A model text message."""
    return ResponseOutputMessage(
        id=f"msg_{n}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=content, annotations=[])],
    )


def call(call_id: str, name: str, **args: Any) -> ResponseFunctionToolCall:
    """A model function call."""
    return ResponseFunctionToolCall(
        id=f"fc_{call_id}",
        type="function_call",
        call_id=call_id,
        name=name,
        arguments=json.dumps(args),
        status="completed",
    )


class ScriptedModel(Model):
    """Replays one scripted output per model call; records each input it was given.

    Like a real provider, it rejects an input whose tool calls are not all answered
    right after their turn (checked with flowmem's ``check_sendable`` on the items
    read back by ``from_responses``).
    """

    def __init__(self, outputs: list[list[Any]]) -> None:
        self.outputs = list(outputs)
        self.inputs: list[list[dict[str, Any]]] = []

    def _respond(self, input: str | list[TResponseInputItem]) -> list[Any]:
        items = (
            [{"role": "user", "content": input}]
            if isinstance(input, str)
            else [dict(i) for i in input]
        )
        self.inputs.append(items)
        problems = check_sendable(from_responses(items, ignore_types={"reasoning"}))
        if problems:
            raise ProviderRejected("; ".join(p.message for p in problems))
        if not self.outputs:
            raise AssertionError("the script has no more model outputs")
        return self.outputs.pop(0)

    async def get_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        """Return the next scripted output."""
        return ModelResponse(output=self._respond(input), usage=Usage(), response_id=None)

    async def stream_response(
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> AsyncIterator[TResponseStreamEvent]:  # type: ignore[override]
        """Stream the next scripted output as one ``response.completed`` event."""
        output = self._respond(input)
        response = Response(
            id="resp_scripted",
            created_at=0,
            model="scripted",
            object="response",
            output=output,
            tool_choice="auto",
            tools=[],
            parallel_tool_calls=True,
        )
        yield ResponseCompletedEvent(
            type="response.completed", response=response, sequence_number=0
        )


__all__ = ["ProviderRejected", "ScriptedModel", "call", "text"]
