"""Memory record nodes: ports, defaults, refusals (MEM-6, 7, 13) and errors."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from flowmem.errors import ConfigurationError, NodeError
from flowmem.nodes import create_node
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from tests.nodes.conftest import Clock
from tests.test_service import ForbiddenStore

NAMED = {"workflow_id": "wf-9", "pipeline_id": "pl-9", "node_id": "node-9"}


def _refusing(scope: str, reason: str) -> ExecutionContext | None:
    field = "user_id" if scope == "user" else "session_id"
    if reason == "no_context":
        return None
    value = {"no_id": None, "unusable_id": -1, "no_one_id": 0}[reason]
    return ExecutionContext(**NAMED, **{field: value})


def test_memory_read_defaults_to_global_scope(
    service: MemoryService, ctx: ExecutionContext
) -> None:
    service.write("global", "greeting", "hello", None)
    out = create_node("memory_read", service).process({"key": "greeting"}, ctx)
    assert out == {
        "value": "hello",
        "found": True,
        "key": "greeting",
        "scope": "global",
        "resolved_scope_id": "",
    }


def test_memory_read_not_found_gives_default_value(
    service: MemoryService, ctx: ExecutionContext
) -> None:
    node = create_node("memory_read", service)
    out = node.process({"key": "k", "scope": "user", "default_value": {"d": 1}}, ctx)
    assert out == {
        "value": {"d": 1},
        "found": False,
        "key": "k",
        "scope": "user",
        "resolved_scope_id": "alice",
    }
    assert node.process({"key": "k"}, ctx)["value"] is None


def test_memory_write_read_delete_round_trip(service: MemoryService, ctx: ExecutionContext) -> None:
    write = create_node("memory_write", service)
    read = create_node("memory_read", service)
    delete = create_node("memory_delete", service)
    assert write.process({"key": "k", "value": [1, "two"], "scope": "session"}, ctx) == {
        "success": True,
        "key": "k",
        "scope": "session",
        "resolved_scope_id": "sess-1",
    }
    assert read.process({"key": "k", "scope": "session"}, ctx)["value"] == [1, "two"]
    assert service.read("session", "k", ctx).value == [1, "two"]  # the same service bucket
    assert delete.process({"key": "k", "scope": "session"}, ctx) == {
        "success": True,
        "key": "k",
        "scope": "session",
        "resolved_scope_id": "sess-1",
    }
    assert read.process({"key": "k", "scope": "session"}, ctx)["found"] is False


def test_memory_write_null_is_a_value(service: MemoryService, ctx: ExecutionContext) -> None:
    create_node("memory_write", service).process({"key": "k", "value": None}, ctx)
    out = create_node("memory_read", service).process({"key": "k", "default_value": "d"}, ctx)
    assert out["found"] is True and out["value"] is None


def test_memory_write_ttl(service: MemoryService, ctx: ExecutionContext, clock: Clock) -> None:
    create_node("memory_write", service).process({"key": "k", "value": 1, "ttl": 10}, ctx)
    read = create_node("memory_read", service)
    assert read.process({"key": "k"}, ctx)["found"] is True
    clock.now += 10
    assert read.process({"key": "k"}, ctx)["found"] is False


def test_config_sets_port_defaults(service: MemoryService, ctx: ExecutionContext) -> None:
    write = create_node("memory_write", service, {"scope": "user", "key": "prefs"})
    assert write.process({"value": 3}, ctx)["resolved_scope_id"] == "alice"
    read = create_node("memory_read", service, {"scope": "user", "default_value": 0})
    assert read.process({"key": "prefs"}, ctx)["value"] == 3
    assert read.process({"key": "other"}, ctx)["value"] == 0
    # A wired port wins over the config default.
    assert read.process({"key": "prefs", "scope": "global"}, ctx)["found"] is False


@pytest.mark.parametrize(
    "config",
    [{"scope": "tenant"}, {"key": ""}, {"ttl": -1}, {"bogus": 1}, {"scope": 3}, "scope=user"],
)
def test_bad_config_is_a_configuration_error(service: MemoryService, config: Any) -> None:
    with pytest.raises(ConfigurationError):
        create_node("memory_write", service, config)


def test_memory_node_needs_a_service() -> None:
    with pytest.raises(ConfigurationError):
        create_node("memory_read", None)


MEMORY_NODES = {
    "memory_read": {"key": "k", "default_value": "dflt"},
    "memory_write": {"key": "k", "value": {"v": 1}, "ttl": 5},
    "memory_delete": {"key": "k"},
}
NEUTRAL = {
    "memory_read": {"value": "dflt", "found": False, "resolved_scope_id": ""},
    "memory_write": {"success": False, "resolved_scope_id": ""},
    "memory_delete": {"success": False, "resolved_scope_id": ""},
}


@pytest.mark.parametrize("reason", ["no_context", "no_id", "unusable_id", "no_one_id"])
@pytest.mark.parametrize("scope", ["user", "session"])
@pytest.mark.parametrize("type_id", list(MEMORY_NODES))
def test_mem_7_memory_node_refusal_is_neutral_warns_once_and_touches_no_store(
    caplog: pytest.LogCaptureFixture, type_id: str, scope: str, reason: str
) -> None:
    store = ForbiddenStore()
    node = create_node(type_id, MemoryService(store))  # type: ignore[arg-type]
    with caplog.at_level(logging.DEBUG, logger="flowmem"):
        out = node.process({**MEMORY_NODES[type_id], "scope": scope}, _refusing(scope, reason))
    assert store.touched == []
    assert out == {**NEUTRAL[type_id], "key": "k", "scope": scope}
    records = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(records) == 1
    text = records[0].getMessage()
    assert records[0].name == "flowmem" and reason in text and scope in text
    if reason != "no_context":
        assert "'node-9'" in text and "'pl-9'" in text and "'wf-9'" in text


def test_mem_6_user_scoped_nodes_refuse_without_a_user(
    service: MemoryService, caplog: pytest.LogCaptureFixture
) -> None:
    anonymous = ExecutionContext(session_id="s", **NAMED)
    write = create_node("memory_write", service, {"scope": "user"})
    with caplog.at_level(logging.WARNING, logger="flowmem"):
        assert write.process({"key": "k", "value": 1}, anonymous)["success"] is False
    assert len(caplog.records) == 1
    assert service.read_raw("user", "", "k").found is False


def test_mem_13_session_scoped_nodes_refuse_without_a_session(service: MemoryService) -> None:
    anonymous = {"user_id": "alice", **NAMED}  # a plain mapping context is accepted too
    write = create_node("memory_write", service, {"scope": "session"})
    assert write.process({"key": "k", "value": 1}, anonymous)["success"] is False
    assert service.read_raw("session", "", "k").found is False


RAW_NODES = {
    "memory_read_raw": {"key": "k", "scope_id": "u-1", "scope": "user"},
    "memory_write_raw": {"key": "k", "value": 5, "scope_id": "u-1", "scope": "user"},
    "memory_delete_raw": {"key": "k", "scope_id": "u-1", "scope": "user"},
}


def test_raw_nodes_use_the_explicit_scope_id_and_never_refuse(
    service: MemoryService, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="flowmem"):
        out = create_node("memory_write_raw", service).process(RAW_NODES["memory_write_raw"], None)
        assert out == {"success": True, "key": "k", "scope": "user", "resolved_scope_id": "u-1"}
        assert service.read("user", "k", ExecutionContext(user_id="u-1")).value == 5
        read = create_node("memory_read_raw", service).process(RAW_NODES["memory_read_raw"], None)
        assert read == {
            "value": 5,
            "found": True,
            "key": "k",
            "scope": "user",
            "resolved_scope_id": "u-1",
        }
        gone = create_node("memory_delete_raw", service).process(RAW_NODES["memory_delete_raw"])
        assert gone["success"] is True
        assert service.read_raw("user", "u-1", "k").found is False
        glob = create_node("memory_write_raw", service).process(
            {"key": "k", "value": 1, "scope_id": ""}
        )
        assert glob["scope"] == "global" and glob["resolved_scope_id"] == ""
    assert caplog.records == []


@pytest.mark.parametrize("type_id", list(RAW_NODES))
def test_raw_nodes_require_scope_id(service: MemoryService, type_id: str) -> None:
    inputs = {k: v for k, v in RAW_NODES[type_id].items() if k != "scope_id"}
    with pytest.raises(NodeError) as caught:
        create_node(type_id, service).process(inputs, None)
    assert (caught.value.node, caught.value.port) == (type_id, "scope_id")
    with pytest.raises(NodeError) as caught:
        create_node(type_id, service).process({**inputs, "scope_id": 7}, None)
    assert caught.value.port == "scope_id"


BAD_INPUTS: list[tuple[str, dict[str, Any], str | None]] = [
    ("memory_read", {}, "key"),
    ("memory_read", {"key": None}, "key"),
    ("memory_read", {"key": 5}, "key"),
    ("memory_read", {"key": ""}, "key"),
    ("memory_read", {"key": "k" * 256}, "key"),
    ("memory_read", {"key": "k", "scope": "tenant"}, "scope"),
    ("memory_read", {"key": "k", "scope": ["user"]}, "scope"),
    ("memory_write", {"key": "k"}, "value"),
    ("memory_write", {"value": 1}, "key"),
    ("memory_write", {"key": "k", "value": {1, 2}}, "value"),
    ("memory_write", {"key": "k", "value": float("nan")}, "value"),
    ("memory_write", {"key": "k", "value": 1, "ttl": 0}, "ttl"),
    ("memory_write", {"key": "k", "value": 1, "ttl": "60"}, "ttl"),
    ("memory_write", {"key": "k", "value": 1, "ttl": True}, "ttl"),
    ("memory_delete", {"key": 1.5}, "key"),
    ("memory_delete", {"key": "k", "scope": "User"}, "scope"),
    ("memory_write_raw", {"key": "k", "value": object(), "scope_id": "x"}, "value"),
]


@pytest.mark.parametrize("type_id,inputs,port", BAD_INPUTS)
def test_invalid_inputs_raise_node_error_naming_node_and_port(
    type_id: str, inputs: dict[str, Any], port: str | None, ctx: ExecutionContext
) -> None:
    store = ForbiddenStore()
    node = create_node(type_id, MemoryService(store))  # type: ignore[arg-type]
    with pytest.raises(NodeError) as caught:
        node.process(inputs, ctx)
    assert caught.value.node == type_id and caught.value.port == port
    assert caught.value.code == "node_error"
    assert str(caught.value).startswith(f"{type_id}.{port}: ")
    assert store.touched == []


def test_inputs_and_context_of_the_wrong_type(service: MemoryService) -> None:
    node = create_node("memory_read", service)
    with pytest.raises(NodeError):
        node.process([("key", "k")])  # type: ignore[arg-type]
    with pytest.raises(NodeError):
        node.process({"key": "k"}, {"user": "alice"})
    with pytest.raises(NodeError):
        node.process({"key": "k"}, "alice")  # type: ignore[arg-type]
