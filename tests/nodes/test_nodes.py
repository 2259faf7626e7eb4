"""The node registry: FlowDrop type ids, port names, ``create_node``."""

from __future__ import annotations

import pytest

from flowmem.errors import ConfigurationError
from flowmem.nodes import NODE_TYPES, Node, catalogue, create_node
from flowmem.service import MemoryService
from flowmem.store import MemoryStore

PORTS = {
    "conversation_buffer": (
        ["scope", "key", "max_messages", "role", "content", "message"],
        ["messages", "count", "appended", "appended_any", "key", "scope", "resolved_scope_id"],
    ),
    "conversation_normalize": (["messages"], ["messages", "dropped"]),
    "message_assemble": ([], ["messages"]),
    "text_to_message": (["text", "role", "tool_call_id"], ["messages", "message"]),
    "memory_read": (
        ["key", "default_value", "scope"],
        ["value", "found", "key", "scope", "resolved_scope_id"],
    ),
    "memory_write": (
        ["key", "value", "scope", "ttl"],
        ["success", "key", "scope", "resolved_scope_id"],
    ),
    "memory_delete": (["key", "scope"], ["success", "key", "scope", "resolved_scope_id"]),
    "memory_read_raw": (
        ["key", "scope_id", "default_value", "scope"],
        ["value", "found", "key", "scope", "resolved_scope_id"],
    ),
    "memory_write_raw": (
        ["key", "value", "scope_id", "scope", "ttl"],
        ["success", "key", "scope", "resolved_scope_id"],
    ),
    "memory_delete_raw": (
        ["key", "scope_id", "scope"],
        ["success", "key", "scope", "resolved_scope_id"],
    ),
}

DEFAULTS = {
    ("conversation_buffer", "scope"): "session",
    ("conversation_buffer", "key"): "chat_history",
    ("conversation_buffer", "max_messages"): 0,
    ("memory_read", "scope"): "global",
    ("memory_write", "scope"): "global",
    ("memory_delete", "scope"): "global",
}


def test_registry_holds_every_flowdrop_node_type() -> None:
    assert set(NODE_TYPES) == set(PORTS)
    for type_id, cls in NODE_TYPES.items():
        assert issubclass(cls, Node) and cls.type_id == type_id
        assert cls.process.__doc__ and cls.__doc__


@pytest.mark.parametrize("type_id", sorted(PORTS))
def test_ports_and_defaults(type_id: str) -> None:
    entry = NODE_TYPES[type_id].describe()
    inputs, outputs = PORTS[type_id]
    assert [p["name"] for p in entry["inputs"]] == inputs
    assert [p["name"] for p in entry["outputs"]] == outputs
    for port in entry["inputs"]:
        if (type_id, port["name"]) in DEFAULTS:
            assert port["default"] == DEFAULTS[(type_id, port["name"])]


@pytest.mark.parametrize("type_id", sorted(PORTS))
def test_create_node_builds_each_type(type_id: str) -> None:
    node = create_node(type_id, MemoryService(MemoryStore()))
    assert isinstance(node, NODE_TYPES[type_id])


@pytest.mark.parametrize("type_id", ["", "memory-read", "Memory_Read", None, "llm"])
def test_unknown_type_is_a_configuration_error(type_id: object) -> None:
    with pytest.raises(ConfigurationError):
        create_node(type_id, None)  # type: ignore[arg-type]


def test_catalogue_lists_every_type() -> None:
    assert [entry["type_id"] for entry in catalogue()] == list(NODE_TYPES)
