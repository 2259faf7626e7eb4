"""A scripted ADK model (a ``BaseLlm``) and the agent the Runner tests drive with it.

``ScriptedLlm`` answers each request with the next reply of its script and keeps a
copy of every request, so a test can read what ADK would have sent to a provider.
Like a provider, it refuses a request whose ``function_call`` is not answered by the
``function_response`` right after it (``ProviderRejected``).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from pydantic import Field

APP = "shop"


class ProviderRejected(Exception):
    """What a provider answers (a 400) to a call left without its answer."""


def asks_tool(query: str) -> LlmResponse:
    """A reply calling the ``lookup`` tool."""
    call = types.FunctionCall(name="lookup", args={"query": query})
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))


def says(text: str) -> LlmResponse:
    """A text reply."""
    return LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


def check_pairing(contents: list[types.Content]) -> None:
    """Raise ``ProviderRejected`` unless every call is answered in the content right after it."""
    for index, content in enumerate(contents):
        calls = [p.function_call.name for p in content.parts or [] if p.function_call]
        if not calls:
            continue
        following = contents[index + 1] if index + 1 < len(contents) else None
        answered = [p.function_response.name for p in (following.parts or []) if p.function_response] if following else []
        if sorted(answered) != sorted(calls):
            raise ProviderRejected(f"function call(s) {calls} at content {index} have no answer after them")


class ScriptedLlm(BaseLlm):
    """Replies from a script; records every request (deep copies)."""

    model: str = "scripted"
    script: list[LlmResponse] = Field(default_factory=list)
    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        """The next reply of the script."""
        self.requests.append(llm_request.model_copy(deep=True))
        check_pairing(list(llm_request.contents))
        yield self.script.pop(0)


def lookup(query: str) -> dict[str, Any]:
    """Look a product up."""
    return {"found": f"2 results for {query}"}


def agent(model: ScriptedLlm) -> LlmAgent:
    """The shop assistant: one tool, the scripted model."""
    return LlmAgent(name="assistant", model=model, instruction="Help.", tools=[lookup])


def message(text: str) -> types.Content:
    """A user message."""
    return types.Content(role="user", parts=[types.Part(text=text)])
