"""A scripted LangChain chat model that rejects an unsendable history, as a provider does.

``create_agent`` and the prebuilt ReAct agent call ``bind_tools``; this model accepts any
tools and replays one scripted ``AIMessage`` per call. Before answering it checks the
request with flowmem's ``check_sendable`` (the rules a provider enforces: every tool call
answered right after its turn, no result without its call) and raises
``ProviderRejected`` like a 400 would.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from flowmem.core import check_sendable
from flowmem.integrations.langchain import message_to_row


class ProviderRejected(Exception):
    """What a provider answers (a 400) to a history with an unanswered call."""


def rejection(messages: Sequence[BaseMessage]) -> str | None:
    """What a provider would say of this request, or None when it accepts it."""
    problems = [
        p
        for p in check_sendable([message_to_row(m) for m in messages])
        if p.code != "system_not_first"
    ]
    return "; ".join(p.message for p in problems) or None


class StrictScriptedModel(BaseChatModel):
    """Replays scripted replies; rejects a history a provider would reject."""

    replies: list[AIMessage]
    script_file: str | None = None  # where the index of the next reply is kept across processes
    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "strict-scripted"

    @property
    def calls(self) -> list[list[BaseMessage]]:
        """Every request this model was given, in order."""
        return self._calls

    def bind_tools(self, tools: Any, **kwargs: Any) -> StrictScriptedModel:
        """Any tools: the replies are scripted."""
        return self

    def _next_index(self) -> int:
        if self.script_file is None:
            return len(self._calls) - 1
        path = Path(self.script_file)
        index = json.loads(path.read_text()) if path.exists() else 0
        path.write_text(json.dumps(index + 1))
        return int(index)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._calls.append(list(messages))
        problem = rejection(messages)
        if problem is not None:
            raise ProviderRejected(problem)
        reply = self.replies[self._next_index()]
        return ChatResult(generations=[ChatGeneration(message=reply.model_copy())])
