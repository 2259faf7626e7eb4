"""Write-ahead for a pydantic-ai run: its new messages stored before each model request and each tool.

``WriteAhead`` is a pydantic-ai capability for one run of a conversation (DESIGN.md §5,
"Write-ahead at tool boundaries"; decision 0099). Before each model request it stores
the run's new messages (the user's prompt first), and before the first tool of a model
response it stores that response, so no tool starts before the call that asked for it
is durable, and a process killed anywhere in the turn leaves the question and every
call it declared in the store. What it stored is remembered as an ``Ahead`` on the
store, so the run's own save afterwards (``store.save(result)``) stores only the rest,
never a message twice, and continues from the revision the write-ahead left.

It needs nothing private of pydantic-ai: the run's history is ``RunContext.messages``,
whose first messages are the conversation it was given, the same objects.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from copy import copy
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationEntry
from pydantic_ai.messages import ModelMessage, ToolCallPart
from pydantic_ai.models import ModelRequestContext
from pydantic_ai.tools import RunContext, ToolDefinition

if TYPE_CHECKING:
    from pydantic_ai.usage import RunUsage

log = logging.getLogger("flowmem.integrations.pydantic_ai")


@dataclass
class Ahead:
    """What a run's write-ahead stored: where it started, where it is, and the messages it wrote."""

    conversation_id: str
    base: str | None
    """The revision the run's conversation was loaded at (None: not stored before the run)."""
    revision: str | None = None
    """The revision the write-ahead's last write left (None: it wrote nothing yet)."""
    head: str | None = None
    """The entry id of the last message it wrote."""
    written: list[ModelMessage] = field(default_factory=list)
    """The messages it wrote, in order."""
    saved: list[ConversationEntry] = field(default_factory=list)
    """The entries the run's own save stored after it (what that save returns)."""

    def continues(self, conversation: Conversation) -> bool:
        """Whether ``conversation`` is the one this run wrote ahead of: same id, base revision and messages."""
        return (
            self.revision is not None
            and conversation.conversation_id == self.conversation_id
            and conversation.revision == self.base
            and any(message is self.written[0] for message in conversation.messages)
        )

    def relinked(self, entries: Sequence[ConversationEntry]) -> list[ConversationEntry]:
        """The run's save's ``entries`` without the messages written ahead, chained after the last one written.

        Each written message is recognised once, in order (``is`` or ``==``): the save
        stores the rest, never a message twice (DESIGN.md §5).
        """
        left = list(self.written)
        kept: list[ConversationEntry] = []
        parent = self.head
        for entry in entries:
            if left and (entry.message is left[0] or entry.message == left[0]):
                left.pop(0)
                continue
            kept.append(replace(entry, parent_id=parent))
            parent = entry.id
        return kept


class WritesAhead(Protocol):
    """What a ``WriteAhead`` needs of its store (``FlowmemConversationStore`` is one)."""

    async def stored_prefix(self, conversation: Conversation) -> int:
        """How many of ``conversation``'s first messages are the stored history's."""
        ...

    async def write_ahead_messages(
        self, ahead: Ahead, messages: Sequence[ModelMessage], usage: RunUsage, scope: str | None
    ) -> None:
        """Store a run's new ``messages`` after the stored head."""
        ...


class WriteAhead(AbstractCapability[Any]):
    """A capability storing a run's new messages before each model request and tool (decision 0099).

    Made for one run by ``FlowmemConversationStore.write_ahead(conversation, scope=...)``
    and given to ``agent.run`` or ``agent.iter`` as ``capabilities=[...]``;
    ``FlowmemConversationStore.run`` adds it for you.
    """

    def __init__(
        self, store: WritesAhead, conversation: Conversation, scope: str | None
    ) -> None:
        super().__init__()
        self.store = store
        self.conversation = conversation
        self.scope = scope
        self.known = _known(conversation)
        self.ahead: Ahead | None = None
        self.off = False
        self._lock = asyncio.Lock()

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        """Store the run's new messages (the prompt, tool results) before the model is asked."""
        await self._write(ctx)
        return request_context

    async def before_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
    ) -> dict[str, Any]:
        """Store the response that declared ``call`` before its tool runs (write-ahead)."""
        await self._write(ctx)
        return args

    async def _write(self, ctx: RunContext[Any]) -> None:
        async with self._lock:
            if self.off:
                return
            messages = list(ctx.messages)
            if ctx.conversation_id not in (None, self.conversation.conversation_id):
                self._stop(f"the run's conversation is {ctx.conversation_id!r}, not the one given")
                return
            if self.ahead is None:
                self.ahead = Ahead(self.conversation.conversation_id, self.conversation.revision)
            if self.known is None:
                self.known = await self.store.stored_prefix(self.conversation)
            known = self.known
            start = known + len(self.ahead.written)
            kept = messages[:known] == self.conversation.messages[:known] and all(
                a is b for a, b in zip(messages[known:start], self.ahead.written, strict=False)
            )
            if not kept or len(messages) < start:
                self._stop("a capability rewrote the run's history")
                return
            new = messages[start:]
            if new:
                await self.store.write_ahead_messages(self.ahead, new, copy(ctx.usage), self.scope)

    def _stop(self, why: str) -> None:
        self.off = True
        log.warning(
            "flowmem write-ahead stopped for conversation %s: %s; what the run stored so far "
            "stays, the rest is stored by the run's save",
            self.conversation.conversation_id,
            why,
        )


def _known(conversation: Conversation) -> int | None:
    """How many of the conversation's first messages the store has (None: compare them with it)."""
    if conversation.new_message_index is not None:
        return conversation.new_message_index
    return 0 if conversation.revision is None else None


__all__ = ["Ahead", "WriteAhead"]
