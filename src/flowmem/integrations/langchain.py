"""LangChain chat history backed by a flowmem buffer (``pip install 'flowmem[langchain]'``).

``FlowmemChatMessageHistory`` is a ``BaseChatMessageHistory``: every write goes
through ``MemoryService.append``, so LangChain gets flowmem's guarantees — a
re-delivered ``ToolMessage`` is stored once (MEM-1), a ``HumanMessage`` after an
interrupted tool call heals it (MEM-3), a late real result replaces the placeholder
(MEM-10), ``max_messages`` windows the buffer, and a ``session``/``user`` scope
without a real identity refuses instead of sharing one history (MEM-6, 7, 13).
"""

from __future__ import annotations

from flowmem.integrations import require

require("langchain_core", "langchain")

import asyncio  # noqa: E402
from collections.abc import Mapping, Sequence  # noqa: E402
from typing import Any  # noqa: E402

from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from flowmem.core import ROLES, Message, normalize, to_flat  # noqa: E402
from flowmem.errors import UnknownRoleError, UnsupportedContentError  # noqa: E402
from flowmem.formats._common import input_object, join_text, read_call  # noqa: E402
from flowmem.scope import ExecutionContext  # noqa: E402
from flowmem.service import BufferResult, MemoryService  # noqa: E402

_TEXT_BLOCKS = ("text", "input_text", "output_text")
_CALL_BLOCKS = frozenset({"tool_use", "tool_call", "function_call", "tool_call_chunk"})


def message_to_row(message: BaseMessage) -> Message:
    """Return a LangChain message as a flowmem flat row.

    ``HumanMessage``→user, ``AIMessage``→assistant (``tool_calls`` become
    ``{"tool_call_id", "name", "args"}``), ``ToolMessage``→tool (``tool_call_id``),
    ``SystemMessage``→system, a ``ChatMessage`` with one of those roles keeps it.
    Text content blocks are joined with a newline; an ``AIMessage``'s own call blocks
    (``tool_use``, ``tool_call``...) are skipped since ``tool_calls`` carries them;
    other blocks (images, files, thinking) raise ``UnsupportedContentError``, as
    does any other message class.
    """
    raw = message.content
    if isinstance(message, AIMessage) and isinstance(raw, list):
        # Provider-native call blocks repeat what ``tool_calls`` already carries.
        raw = [b for b in raw if not (isinstance(b, dict) and b.get("type") in _CALL_BLOCKS)]
    content = join_text(raw, _TEXT_BLOCKS, type(message).__name__)
    if isinstance(message, HumanMessage):
        return {"role": "user", "content": content}
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": content}
    if isinstance(message, ToolMessage):
        return {"role": "tool", "content": content, "tool_call_id": message.tool_call_id}
    if isinstance(message, AIMessage):
        row: Message = {"role": "assistant", "content": content}
        if message.tool_calls:
            row["tool_calls"] = [
                {"tool_call_id": call.get("id"), "name": call["name"], "args": call["args"]}
                for call in message.tool_calls
            ]
        return row
    if isinstance(message, ChatMessage):
        if message.role not in ROLES or message.role == "tool":
            raise UnknownRoleError(f"ChatMessage role {message.role!r} is not a flowmem role")
        return {"role": message.role, "content": content}
    raise UnsupportedContentError(f"{type(message).__name__} cannot be stored by flowmem")


def row_to_message(row: Mapping[str, Any]) -> BaseMessage:
    """Return a flowmem row (flat or stored) as the LangChain message of its role."""
    flat = to_flat(row)
    if flat is None:
        raise UnknownRoleError(f"not a flowmem message: {row!r}")
    role, content = flat["role"], flat["content"]
    if role == "user":
        return HumanMessage(content=content)
    if role == "system":
        return SystemMessage(content=content)
    if role == "tool":
        return ToolMessage(content=content, tool_call_id=str(flat.get("tool_call_id", "")))
    calls = [read_call(call) for call in flat.get("tool_calls") or []]
    return AIMessage(
        content=content,
        tool_calls=[
            {"id": call.id, "name": call.name, "args": input_object(call.args), "type": "tool_call"}
            for call in calls
        ],
    )


class FlowmemChatMessageHistory(BaseChatMessageHistory):
    """A LangChain chat history stored in one flowmem buffer (scope, key, context).

    ``messages`` is the buffer normalized (MEM-5), i.e. what a provider accepts: a
    call still waiting for its result reads as interrupted, while the stored buffer
    keeps the call open so the real result can still land (``raw_messages`` shows
    the stored rows). Give either ``context`` or ``session_id`` (a shortcut for
    ``ExecutionContext(session_id=...)``, what ``RunnableWithMessageHistory`` passes).
    """

    def __init__(
        self,
        service: MemoryService,
        *,
        session_id: Any = None,
        context: ExecutionContext | None = None,
        scope: str = "session",
        key: str = "chat_history",
        max_messages: int = 0,
    ) -> None:
        if context is None and session_id is not None:
            context = ExecutionContext(session_id=session_id)
        self.service = service
        self.context = context
        self.scope = scope
        self.key = key
        self.max_messages = max_messages
        self.last_result: BufferResult | None = None

    def _rows(self) -> list[Message]:
        return self.service.load(self.scope, self.key, self.context).messages

    @property
    def raw_messages(self) -> list[BaseMessage]:
        """The stored rows as LangChain messages, placeholders and all, not normalized."""
        return [row_to_message(row) for row in self._rows()]

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The history as a provider accepts it: the buffer normalized (MEM-5)."""
        return [row_to_message(row) for row in normalize(self._rows()).messages]

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append through ``MemoryService.append`` (dedup, healing, window, refusal).

        Implements MEM-1, MEM-3 and MEM-10 through the service. All messages are
        converted before anything is written; ``last_result`` holds what the append
        reported (``appended`` 0 and ``refusal`` set when the scope refused).
        """
        rows = [message_to_row(message) for message in messages]
        self.last_result = self.service.append(
            self.scope, self.key, rows, self.context, self.max_messages, return_messages=False
        )

    def clear(self) -> None:
        """Delete every row of the buffer (nothing when the scope refuses)."""
        self.service.clear(self.scope, self.key, self.context)

    async def aget_messages(self) -> list[BaseMessage]:
        """Async ``messages`` (the store call runs in a worker thread)."""
        return await asyncio.to_thread(lambda: self.messages)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Async ``add_messages`` (the store call runs in a worker thread)."""
        await asyncio.to_thread(self.add_messages, list(messages))

    async def aclear(self) -> None:
        """Async ``clear`` (the store call runs in a worker thread)."""
        await asyncio.to_thread(self.clear)


__all__ = ["FlowmemChatMessageHistory", "message_to_row", "row_to_message"]
