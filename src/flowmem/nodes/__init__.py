"""FlowDrop memory nodes: processors with FlowDrop's type ids and port names.

A host workflow engine looks a node type up by its id and runs it::

    node = create_node("memory_read", service, {"scope": "user"})
    outputs = node.process({"key": "prefs"}, ExecutionContext(user_id="alice", ...))

Every memory node goes through ``flowmem.service.MemoryService`` (never around it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flowmem.errors import ConfigurationError
from flowmem.nodes.base import Inputs, Node, Port
from flowmem.nodes.buffer import ConversationBuffer
from flowmem.nodes.memory import (
    MemoryDelete,
    MemoryDeleteRaw,
    MemoryRead,
    MemoryReadRaw,
    MemoryWrite,
    MemoryWriteRaw,
)
from flowmem.nodes.messages import ConversationNormalize, MessageAssemble, TextToMessage
from flowmem.service import MemoryService

NODE_TYPES: dict[str, type[Node]] = {
    cls.type_id: cls
    for cls in (
        ConversationBuffer,
        ConversationNormalize,
        MessageAssemble,
        TextToMessage,
        MemoryRead,
        MemoryWrite,
        MemoryDelete,
        MemoryReadRaw,
        MemoryWriteRaw,
        MemoryDeleteRaw,
    )
}


def create_node(
    type_id: str, service: MemoryService | None, config: Mapping[str, Any] | None = None
) -> Node:
    """Return a node of FlowDrop type ``type_id`` bound to ``service`` and ``config``.

    An unknown type id or a bad config raises ``ConfigurationError``.
    """
    cls = NODE_TYPES.get(type_id) if isinstance(type_id, str) else None
    if cls is None:
        raise ConfigurationError(
            f"unknown node type {type_id!r}: expected one of {', '.join(sorted(NODE_TYPES))}"
        )
    return cls(service, config)


def catalogue() -> list[dict[str, Any]]:
    """Return every node type's catalogue entry (id, label, description, ports)."""
    return [cls.describe() for cls in NODE_TYPES.values()]


__all__ = [
    "NODE_TYPES",
    "ConversationBuffer",
    "ConversationNormalize",
    "Inputs",
    "MemoryDelete",
    "MemoryDeleteRaw",
    "MemoryRead",
    "MemoryReadRaw",
    "MemoryWrite",
    "MemoryWriteRaw",
    "MessageAssemble",
    "Node",
    "Port",
    "TextToMessage",
    "catalogue",
    "create_node",
]
