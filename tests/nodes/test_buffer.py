"""The ``conversation_buffer`` node: ports, defaults, the append rules, refusals, errors."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from flowmem.core import HEALED_CONTENT, check_sendable
from flowmem.errors import ConfigurationError, NodeError
from flowmem.nodes import create_node
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from tests.nodes.conftest import Clock
from tests.test_service import ForbiddenStore

NAMED = {"workflow_id": "wf-9", "pipeline_id": "pl-9", "node_id": "node-9"}
CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search"}}],
}


def _contents(out: dict[str, Any]) -> list[str]:
    return [m["content"] for m in out["messages"]]


def test_defaults_session_scope_and_chat_history_key(
    service: MemoryService, ctx: ExecutionContext, clock: Clock
) -> None:
    out = create_node("conversation_buffer", service).process({"content": "hi"}, ctx)
    assert out == {
        "messages": [
            {"role": "user", "content": "hi", "metadata": {}, "timestamp": int(clock.now)}
        ],
        "count": 1,
        "appended": 1,
        "appended_any": True,
        "key": "chat_history",
        "scope": "session",
        "resolved_scope_id": "sess-1",
    }
    assert service.load("session", "chat_history", ctx).count == 1


def test_role_and_content_form_one_message(service: MemoryService, ctx: ExecutionContext) -> None:
    node = create_node("conversation_buffer", service)
    node.process({"role": "user", "content": "question"}, ctx)
    out = node.process({"role": "assistant", "content": 42}, ctx)
    assert [(m["role"], m["content"]) for m in out["messages"]] == [
        ("user", "question"),
        ("assistant", "42"),
    ]


def test_message_port_takes_one_map_or_a_list(
    service: MemoryService, ctx: ExecutionContext
) -> None:
    node = create_node("conversation_buffer", service)
    one = node.process({"message": {"role": "user", "content": "a"}}, ctx)
    assert (one["appended"], one["count"]) == (1, 1)
    many = node.process(
        {"message": [{"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]},
        ctx,
    )
    assert (many["appended"], many["count"]) == (2, 3)
    assert _contents(many) == ["a", "b", "c"]


def test_message_items_come_before_the_content_message(
    service: MemoryService, ctx: ExecutionContext
) -> None:
    node = create_node("conversation_buffer", service)
    node.process({"message": CALL}, ctx)
    out = node.process(
        {
            "message": {"role": "tool", "content": "found it", "tool_call_id": "c1"},
            "content": "thanks",
        },
        ctx,
    )
    assert [(m["role"], m["content"]) for m in out["messages"]] == [
        ("assistant", ""),
        ("tool", "found it"),
        ("user", "thanks"),
    ]


def test_user_role_without_content_is_a_pure_read(
    service: MemoryService, ctx: ExecutionContext
) -> None:
    node = create_node("conversation_buffer", service)
    node.process({"message": CALL}, ctx)
    for inputs in ({}, {"role": "user"}, {"role": "user", "content": ""}, {"content": None}):
        out = node.process(inputs, ctx)
        assert (out["appended"], out["appended_any"], out["count"]) == (0, False, 1)
        assert out["messages"][0]["metadata"]["tool_calls"][0]["id"] == "c1"


def test_mem_3_user_turn_through_the_node_heals_a_dangling_call(
    service: MemoryService, ctx: ExecutionContext
) -> None:
    node = create_node("conversation_buffer", service)
    node.process({"message": CALL}, ctx)
    out = node.process({"content": "anything?"}, ctx)
    assert [m["role"] for m in out["messages"]] == ["assistant", "tool", "user"]
    assert out["messages"][1]["content"] == HEALED_CONTENT
    assert out["messages"][1]["metadata"] == {"tool_call_id": "c1", "healed": True}
    assert (out["appended"], out["count"]) == (1, 3)
    assert check_sendable(out["messages"]) == []


def test_mem_1_mem_14_duplicate_result_reports_zero(
    service: MemoryService, ctx: ExecutionContext
) -> None:
    node = create_node("conversation_buffer", service)
    result = {"role": "tool", "content": "r", "tool_call_id": "c1"}
    assert node.process({"message": [CALL, result]}, ctx)["appended"] == 2
    again = node.process({"message": result}, ctx)
    assert (again["appended"], again["appended_any"], again["count"]) == (0, False, 2)


def test_max_messages_windows_the_buffer(service: MemoryService, ctx: ExecutionContext) -> None:
    node = create_node("conversation_buffer", service, {"max_messages": 2})
    for text in ("a", "b", "c"):
        out = node.process({"content": text}, ctx)
    assert _contents(out) == ["b", "c"] and out["count"] == 2 and out["appended"] == 1
    wider = node.process({"content": "d", "max_messages": 0}, ctx)
    assert _contents(wider) == ["b", "c", "d"]


def test_scope_and_key_ports(service: MemoryService, ctx: ExecutionContext) -> None:
    node = create_node("conversation_buffer", service)
    out = node.process({"scope": "user", "key": "notes", "content": "x"}, ctx)
    assert (out["scope"], out["key"], out["resolved_scope_id"]) == ("user", "notes", "alice")
    assert service.load("user", "notes", ctx).count == 1
    assert service.load("session", "chat_history", ctx).count == 0


@pytest.mark.parametrize("reason", ["no_context", "no_id", "unusable_id", "no_one_id"])
@pytest.mark.parametrize("scope", ["user", "session"])
def test_mem_7_mem_14_refused_buffer_drops_the_turn_warns_once_no_store(
    caplog: pytest.LogCaptureFixture, scope: str, reason: str
) -> None:
    field = "user_id" if scope == "user" else "session_id"
    value = {"no_id": None, "unusable_id": "  ", "no_one_id": "0"}.get(reason)
    context = None if reason == "no_context" else ExecutionContext(**NAMED, **{field: value})
    store = ForbiddenStore()
    node = create_node("conversation_buffer", MemoryService(store))  # type: ignore[arg-type]
    with caplog.at_level(logging.DEBUG, logger="flowmem"):
        out = node.process({"scope": scope, "content": "hello", "message": CALL}, context)
    assert store.touched == []
    assert out == {
        "messages": [],
        "count": 0,
        "appended": 0,
        "appended_any": False,
        "key": "chat_history",
        "scope": scope,
        "resolved_scope_id": "",
    }
    records = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(records) == 1 and records[0].name == "flowmem"
    if reason != "no_context":
        text = records[0].getMessage()
        assert "'node-9'" in text and "'pl-9'" in text and "'wf-9'" in text


def test_mem_13_default_session_scope_refuses_without_a_session(
    service: MemoryService, caplog: pytest.LogCaptureFixture
) -> None:
    node = create_node("conversation_buffer", service)
    with caplog.at_level(logging.WARNING, logger="flowmem"):
        out = node.process({"content": "hi"}, ExecutionContext(user_id="alice"))
    assert out["count"] == 0 and out["appended_any"] is False
    assert len(caplog.records) == 1
    assert service.load_raw("session", "", "chat_history").count == 0


BAD: list[tuple[dict[str, Any], str]] = [
    ({"scope": "tenant", "content": "x"}, "scope"),
    ({"scope": 1, "content": "x"}, "scope"),
    ({"key": "", "content": "x"}, "key"),
    ({"key": 7, "content": "x"}, "key"),
    ({"max_messages": -1, "content": "x"}, "max_messages"),
    ({"max_messages": True, "content": "x"}, "max_messages"),
    ({"max_messages": "10", "content": "x"}, "max_messages"),
    ({"role": "bot", "content": "x"}, "role"),
    ({"role": 3, "content": "x"}, "role"),
    ({"role": "bot"}, "role"),
    ({"message": "hello"}, "message"),
    ({"message": 5}, "message"),
    ({"message": [{"role": "user", "content": "ok"}, "junk"]}, "message"),
    ({"message": [{"role": "robot", "content": "x"}]}, "message"),
    ({"message": {"content": "no role"}}, "message"),
]


@pytest.mark.parametrize("inputs,port", BAD)
def test_invalid_inputs_raise_node_error_before_storage(
    inputs: dict[str, Any], port: str, ctx: ExecutionContext
) -> None:
    store = ForbiddenStore()
    node = create_node("conversation_buffer", MemoryService(store))  # type: ignore[arg-type]
    with pytest.raises(NodeError) as caught:
        node.process(inputs, ctx)
    assert (caught.value.node, caught.value.port) == ("conversation_buffer", port)
    assert store.touched == []


def test_a_bad_batch_writes_nothing(service: MemoryService, ctx: ExecutionContext) -> None:
    node = create_node("conversation_buffer", service)
    node.process({"content": "first"}, ctx)
    with pytest.raises(NodeError):
        node.process({"message": [{"role": "user", "content": "second"}, 9]}, ctx)
    assert _contents(node.process({}, ctx)) == ["first"]


@pytest.mark.parametrize(
    "config", [{"scope": "everyone"}, {"max_messages": -3}, {"role": "bot"}, {"window": 3}]
)
def test_bad_config(service: MemoryService, config: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        create_node("conversation_buffer", service, config)
