"""Message nodes that touch no memory: normalize (MEM-5), assemble (MEM-4), text (MEM-16).

They call the pure core rules directly; there is nothing to resolve or store, so
they need no ``MemoryService`` (``create_node`` still accepts one, for uniformity).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from flowmem.core import assemble, normalize, text_to_message
from flowmem.errors import ConfigurationError
from flowmem.nodes.base import Inputs, Node, Port
from flowmem.scope import ExecutionContext

MESSAGES_OUT = Port("messages", "messages", description="the resulting message list")


class RuleNode(Node):
    """A node that runs a pure core rule: nothing to resolve or store, so no ``MemoryService``."""

    uses_memory: ClassVar[bool] = False


class ConversationNormalize(RuleNode):
    """``conversation_normalize``: make a message list sendable to a provider (MEM-5).

    Input: ``messages`` (a list; unwired = empty). Outputs: ``messages`` (flat rows:
    system first, every call answered adjacently, no orphan or duplicate result, no
    leading tool row) and ``dropped`` (entries removed, as counted by the repair).
    """

    type_id: ClassVar[str] = "conversation_normalize"
    label: ClassVar[str] = "Conversation normalize"
    description: ClassVar[str] = "Normalize a conversation so a provider accepts it."
    inputs: ClassVar[tuple[Port, ...]] = (
        Port("messages", "messages", description="the message list to normalize"),
    )
    outputs: ClassVar[tuple[Port, ...]] = (
        MESSAGES_OUT,
        Port("dropped", "integer", description="entries normalization removed"),
    )

    def run(self, inputs: Inputs, context: ExecutionContext | None) -> dict[str, Any]:
        """Run ``flowmem.core.normalize`` (MEM-5)."""
        result = normalize(inputs.value("messages") or [])
        return {"messages": result.messages, "dropped": result.dropped}


class TextToMessage(RuleNode):
    """``text_to_message``: turn a text value and a role into one message (MEM-16).

    Inputs: ``text`` (any value; coerced as normalization coerces content), ``role``
    (``user``/``assistant``/``system``/``tool``; anything else, absent included, is
    ``user``), ``tool_call_id`` (kept only on role ``tool``, trimmed, omitted when
    blank). Outputs: ``messages`` (a one-element list) and ``message`` (the same
    row); both empty when the content is empty.
    """

    type_id: ClassVar[str] = "text_to_message"
    label: ClassVar[str] = "Text to message"
    description: ClassVar[str] = "Turn text and a role into a message."
    inputs: ClassVar[tuple[Port, ...]] = (
        Port("text", "any", description="the content"),
        Port("role", "any", description="the role; an unknown one becomes user"),
        Port("tool_call_id", "any", description="the call a tool row answers"),
    )
    outputs: ClassVar[tuple[Port, ...]] = (
        MESSAGES_OUT,
        Port("message", "object", description="the same row, or {} when empty"),
    )

    def run(self, inputs: Inputs, context: ExecutionContext | None) -> dict[str, Any]:
        """Run ``flowmem.core.text_to_message`` (MEM-16)."""
        result = text_to_message(
            inputs.value("text"), inputs.value("role"), inputs.value("tool_call_id")
        )
        return {"messages": result.messages, "message": result.message}


class MessageAssemble(RuleNode):
    """``message_assemble``: flatten declared message inputs into one list (MEM-4).

    Config: ``inputs``, the ordered list of input port names (each unique). The
    output ``messages`` holds the ports' messages in declared port order: a list
    contributes its message items in order, one message object contributes itself,
    and an unwired port or one carrying no message (null, text, a number) contributes
    nothing — no placeholder, no error, exactly as MEM-4 reads.
    """

    type_id: ClassVar[str] = "message_assemble"
    label: ClassVar[str] = "Message assemble"
    description: ClassVar[str] = "Concatenate message inputs in declared port order."
    extra_config: ClassVar[tuple[str, ...]] = ("inputs",)
    outputs: ClassVar[tuple[Port, ...]] = (MESSAGES_OUT,)

    def configure(self) -> None:
        """Read the ordered port names; a duplicate or a non-name is a ``ConfigurationError``."""
        names = self.config.get("inputs", [])
        if isinstance(names, (str, Mapping)) or not isinstance(names, (list, tuple)):
            raise ConfigurationError(
                f"node {self.type_id}: config 'inputs' must be a list of port names"
            )
        seen: list[str] = []
        for name in names:
            if not isinstance(name, str) or not name:
                raise ConfigurationError(
                    f"node {self.type_id}: port name {name!r} must be a non-empty string"
                )
            if name in seen:
                raise ConfigurationError(
                    f"node {self.type_id}: port {name!r} is declared twice in config 'inputs'"
                )
            seen.append(name)
        self.port_names: tuple[str, ...] = tuple(seen)

    def input_ports(self) -> tuple[Port, ...]:
        """Return the ports the config declares, in order."""
        return tuple(
            Port(name, "any", description="a message, a list of messages, or nothing")
            for name in self.port_names
        )

    def run(self, inputs: Inputs, context: ExecutionContext | None) -> dict[str, Any]:
        """Run ``flowmem.core.assemble`` over the declared ports in order (MEM-4)."""
        return {"messages": assemble(*(inputs.value(name) for name in self.port_names))}
