"""``conversation_buffer``: append to and read a scoped conversation buffer.

The node builds the incoming messages from its ports and hands them to
``MemoryService.append``, which resolves the scope (refusing per MEM-6/MEM-13 and
logging the one MEM-7 warning) and runs the core append rules on the store
(MEM-1, 2, 3, 10, 14 and the window).
"""

from __future__ import annotations

from typing import Any, ClassVar

from flowmem.nodes.base import Inputs, Node, Port, service_errors
from flowmem.scope import ExecutionContext


class ConversationBuffer(Node):
    """``conversation_buffer``: append a turn (or several) to a buffer and return it.

    Inputs: ``scope`` (default ``session``), ``key`` (default ``chat_history``),
    ``max_messages`` (default 0 = unlimited), ``role`` (default ``user``),
    ``content``, ``message`` (one message object or a list, flat or stored shape).
    The incoming messages are the ``message`` items first, then the one message
    ``role`` + ``content`` form when ``content`` is wired. A ``user`` role with no
    content appends nothing: the call is a pure read of the buffer.

    Outputs: ``messages`` (the buffer after the append), ``count``, ``appended``
    (incoming messages that became new rows), ``appended_any``, ``key``, ``scope``,
    ``resolved_scope_id``. A refused identity scope drops the turn and reports an
    empty buffer, 0, false and ``""`` (MEM-7, MEM-14).
    """

    type_id: ClassVar[str] = "conversation_buffer"
    label: ClassVar[str] = "Conversation buffer"
    description: ClassVar[str] = (
        "Append messages to a scoped, tool-call-aware conversation buffer and return it."
    )
    inputs: ClassVar[tuple[Port, ...]] = (
        Port("scope", "scope", default="session", description="one of the six memory scopes"),
        Port("key", "key", default="chat_history", description="the buffer's key"),
        Port("max_messages", "count", default=0, description="window size; 0 = unlimited"),
        Port("role", "role", default="user", description="role of the content message"),
        Port("content", "any", description="content of one message with ``role``"),
        Port("message", "message", description="one message object or a list of them"),
    )
    outputs: ClassVar[tuple[Port, ...]] = (
        Port("messages", "messages", description="the buffer after the append"),
        Port("count", "integer", description="rows in the buffer"),
        Port("appended", "integer", description="incoming messages that became new rows"),
        Port("appended_any", "boolean", description="appended > 0"),
        Port("key", "string"),
        Port("scope", "string"),
        Port("resolved_scope_id", "string", description='"" on a refusal'),
    )

    def run(self, inputs: Inputs, context: ExecutionContext | None) -> dict[str, Any]:
        """Append through ``MemoryService.append`` and report the buffer."""
        scope, key = inputs.value("scope"), inputs.value("key")
        window = inputs.value("max_messages")
        role, content = inputs.value("role"), inputs.value("content")
        incoming: list[Any] = list(inputs.value("message") or [])
        if content is not None:
            incoming.append({"role": role, "content": content})
        with service_errors(self, fallback="message"):
            # the ``messages`` output port is the buffer after the append (the node's
            # contract), so this node asks for it explicitly (decision 0017)
            result = self.memory.append(
                scope, key, incoming, context, window, return_messages=True
            )
        return {
            "messages": result.messages,
            "count": result.count,
            "appended": result.appended,
            "appended_any": result.appended_any,
            "key": key,
            "scope": scope,
            "resolved_scope_id": result.resolved_scope_id,
        }
