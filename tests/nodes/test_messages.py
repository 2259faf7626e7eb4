"""Message nodes: ``conversation_normalize`` (MEM-5), ``message_assemble`` (MEM-4),
``text_to_message`` (MEM-16)."""

from __future__ import annotations

from typing import Any

import pytest

from flowmem.core import HEALED_CONTENT, check_sendable
from flowmem.errors import ConfigurationError, NodeError
from flowmem.nodes import create_node

SYS = {"role": "system", "content": "be brief"}
USER = {"role": "user", "content": "hi"}
ASSIST = {"role": "assistant", "content": "hello"}


# --- conversation_normalize (MEM-5) -----------------------------------------------------


def test_mem_5_normalize_node_moves_system_first_and_heals_calls() -> None:
    node = create_node("conversation_normalize", None)
    messages = [
        USER,
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function"}]},
        SYS,
        {"role": "user", "content": "next"},
    ]
    out = node.process({"messages": messages})
    assert out["dropped"] == 0
    assert [m["role"] for m in out["messages"]] == ["system", "user", "assistant", "tool", "user"]
    assert out["messages"][3] == {"role": "tool", "content": HEALED_CONTENT, "tool_call_id": "c1"}
    assert check_sendable(out["messages"]) == []


def test_mem_5_normalize_node_counts_what_it_drops() -> None:
    node = create_node("conversation_normalize", None)
    messages: list[Any] = [
        {"role": "tool", "content": "orphan", "tool_call_id": "zz"},
        "not a message",
        {"content": "no role"},
        USER,
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1"}]},
        {"role": "tool", "content": "r1", "tool_call_id": "c1"},
        {"role": "tool", "content": "r1 again", "tool_call_id": "c1"},
    ]
    out = node.process({"messages": messages})
    assert out["dropped"] == 4  # two unreadable entries, the orphan, the duplicate
    assert [m["content"] for m in out["messages"]] == ["hi", "", "r1"]


def test_mem_5_normalize_node_coerces_content_to_text() -> None:
    out = create_node("conversation_normalize", None).process(
        {"messages": [{"role": "user", "content": {"a": [1]}}, {"role": "user", "content": 3}]}
    )
    assert [m["content"] for m in out["messages"]] == ['{"a": [1]}', "3"]


def test_normalize_node_unwired_is_empty_and_wrong_type_raises() -> None:
    node = create_node("conversation_normalize", None)
    assert node.process({}) == {"messages": [], "dropped": 0}
    assert node.process({"messages": None}) == {"messages": [], "dropped": 0}
    for bad in ("text", 3, USER):
        with pytest.raises(NodeError) as caught:
            node.process({"messages": bad})
        assert (caught.value.node, caught.value.port) == ("conversation_normalize", "messages")


# --- message_assemble (MEM-4) -----------------------------------------------------------


def test_mem_4_assemble_node_concatenates_in_declared_port_order() -> None:
    node = create_node("message_assemble", None, {"inputs": ["system", "history", "user"]})
    out = node.process({"user": USER, "history": [ASSIST, USER], "system": SYS})
    assert out == {"messages": [SYS, ASSIST, USER, USER]}


def test_mem_4_unwired_or_empty_inputs_contribute_nothing() -> None:
    node = create_node("message_assemble", None, {"inputs": ["a", "b", "c", "d"]})
    out = node.process({"b": [], "c": None, "d": ASSIST})
    assert out == {"messages": [ASSIST]}
    assert node.process({}) == {"messages": []}


def test_mem_4_a_list_contributes_each_item_in_order() -> None:
    node = create_node("message_assemble", None, {"inputs": ["x"]})
    rows = [{"role": "user", "content": str(n)} for n in range(5)]
    assert node.process({"x": rows})["messages"] == rows


def test_assemble_node_ignores_undeclared_ports() -> None:
    node = create_node("message_assemble", None, {"inputs": ["a"]})
    assert node.process({"a": USER, "z": SYS})["messages"] == [USER]


def test_mem_4_assemble_node_values_that_are_no_message_contribute_nothing() -> None:
    node = create_node("message_assemble", None, {"inputs": ["a", "b", "c", "d"]})
    out = node.process({"a": USER, "b": "text", "c": 3, "d": [ASSIST, "x", 7, SYS]})
    assert out == {"messages": [USER, ASSIST, SYS]}


@pytest.mark.parametrize(
    "config",
    [
        {"inputs": ["a", "b", "a"]},
        {"inputs": "a,b"},
        {"inputs": ["a", ""]},
        {"inputs": ["a", 3]},
        {"inputs": {"a": 1}},
        {"ports": ["a"]},
    ],
)
def test_mem_4_duplicate_or_bad_port_names_are_a_configuration_error(config: Any) -> None:
    with pytest.raises(ConfigurationError):
        create_node("message_assemble", None, config)


# --- text_to_message (MEM-16) -----------------------------------------------------------


def test_mem_16_text_node_emits_list_and_object() -> None:
    out = create_node("text_to_message", None).process({"text": "hello", "role": "assistant"})
    assert out == {
        "messages": [{"role": "assistant", "content": "hello"}],
        "message": {"role": "assistant", "content": "hello"},
    }


@pytest.mark.parametrize("role", [None, "bot", "User", 3, ["user"]])
def test_mem_16_unknown_or_absent_role_is_user(role: Any) -> None:
    inputs = {"text": "x"} if role is None else {"text": "x", "role": role}
    assert create_node("text_to_message", None).process(inputs)["message"]["role"] == "user"


def test_mem_16_tool_call_id_only_on_tool_role_trimmed() -> None:
    node = create_node("text_to_message", None)
    tool = node.process({"text": "42", "role": "tool", "tool_call_id": "  c1 "})
    assert tool["message"] == {"role": "tool", "content": "42", "tool_call_id": "c1"}
    blank = node.process({"text": "42", "role": "tool", "tool_call_id": "   "})
    assert "tool_call_id" not in blank["message"]
    user = node.process({"text": "42", "role": "user", "tool_call_id": "c1"})
    assert user["message"] == {"role": "user", "content": "42"}


@pytest.mark.parametrize("text", [None, "", [], {}])
def test_mem_16_empty_content_emits_nothing(text: Any) -> None:
    node = create_node("text_to_message", None)
    inputs = {"role": "tool", "tool_call_id": "c1"} | ({} if text is None else {"text": text})
    out = node.process(inputs)
    expected_empty = text in (None, "")
    if expected_empty:
        assert out == {"messages": [], "message": {}}
    else:  # a non-scalar is serialized, not blanked
        assert out["message"]["content"] in ("[]", "{}")


def test_mem_16_content_is_coerced_like_normalization() -> None:
    node = create_node("text_to_message", None)
    assert node.process({"text": 1.5})["message"]["content"] == "1.5"
    assert node.process({"text": True})["message"]["content"] == "true"
    assert node.process({"text": {"k": "v"}})["message"]["content"] == '{"k": "v"}'
    assert node.process({"text": {"k": {1, 2}}}) == {"messages": [], "message": {}}
