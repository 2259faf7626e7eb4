"""The core's JSON vectors run through the nodes (``tests/vectors``).

MEM-4 through ``message_assemble``, MEM-5 through ``conversation_normalize``, MEM-16
through ``text_to_message``, and every append vector (MEM-1, 2, 3, 10, 11, 14 and the
bad-input cases) through ``conversation_buffer`` → ``MemoryService`` → the store.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flowmem.core import Message
from flowmem.errors import FlowmemError, NodeError
from flowmem.nodes import create_node
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService
from flowmem.store import Address, MemoryStore
from tests.store.seed import seed
from tests.vectors import load_vectors

STAMP = 1_234_567  # the clock of these tests; no vector uses this timestamp
CONTEXT = ExecutionContext(workflow_id="w", pipeline_id="p", node_id="n", session_id="s-1")
ADDRESS = Address("session", "s-1", "chat_history")


class SeededStore(MemoryStore):
    """A ``memory://`` store with a buffer preloaded exactly as a vector gives it."""

    def seed(self, address: Address, rows: list[Message]) -> None:
        """Put ``rows`` in the buffer as they are, bypassing the append rules."""
        seed(self, address, [dict(row) for row in rows])


def _params(operation: str, rules: tuple[str | None, ...] | None = None) -> list[Any]:
    return [
        pytest.param(vector, id=name)
        for name, vector in load_vectors(operation)
        if rules is None or vector["rule"] in rules
    ]


def _unstamped(rows: list[Message]) -> list[Message]:
    """Drop the timestamp the service stamped on new rows (given timestamps are kept)."""
    out = []
    for row in rows:
        copied = dict(row)
        if copied.get("timestamp") == STAMP:
            del copied["timestamp"]
        out.append(copied)
    return out


def _run_buffer(vector: dict[str, Any]) -> tuple[dict[str, Any], SeededStore]:
    given = vector["input"]
    store = SeededStore()
    store.seed(ADDRESS, given["buffer"])
    node = create_node("conversation_buffer", MemoryService(store, clock=lambda: STAMP))
    inputs = {"message": copy.deepcopy(given["messages"]), "max_messages": given["max_messages"]}
    try:
        out = node.process(inputs, CONTEXT)
    except NodeError as exc:
        cause = exc.__cause__
        assert exc.port == "message"
        return {"error": cause.code if isinstance(cause, FlowmemError) else exc.code}, store
    assert out["resolved_scope_id"] == "s-1" and out["scope"] == "session"
    reported = {k: out[k] for k in ("messages", "count", "appended", "appended_any")}
    reported["messages"] = _unstamped(reported["messages"])
    return reported, store


APPEND_RULES = ("MEM-1", "MEM-2", "MEM-3", "MEM-10", "MEM-11", "MEM-14")


@pytest.mark.parametrize("vector", _params("append", APPEND_RULES))
def test_mem_1_2_3_10_11_14_append_vectors_through_the_buffer_node(vector: dict[str, Any]) -> None:
    reported, store = _run_buffer(vector)
    assert reported == vector["expected"], vector["description"]
    assert _unstamped(store.load(ADDRESS)) == vector["expected"]["messages"]


@pytest.mark.parametrize("vector", _params("append", (None,)))
def test_bad_input_vectors_through_the_buffer_node_change_nothing(vector: dict[str, Any]) -> None:
    reported, store = _run_buffer(vector)
    assert reported == vector["expected"], vector["description"]
    assert store.load(ADDRESS) == vector["input"]["buffer"]


@pytest.mark.parametrize("vector", _params("assemble"))
def test_mem_4_vectors_through_the_assemble_node(vector: dict[str, Any]) -> None:
    values = vector["input"]["inputs"]
    names = [f"in_{n}" for n in range(len(values))]
    node = create_node("message_assemble", None, {"inputs": names})
    wired = [(name, value) for name, value in zip(names, values, strict=True) if value is not None]
    # The host's mapping order is reversed: only the declared port order counts.
    assert node.process(dict(reversed(wired))) == vector["expected"], vector["description"]


@pytest.mark.parametrize("vector", _params("normalize"))
def test_mem_5_vectors_through_the_normalize_node(vector: dict[str, Any]) -> None:
    out = create_node("conversation_normalize", None).process(
        {"messages": vector["input"]["messages"]}, CONTEXT
    )
    assert out == vector["expected"], vector["description"]


@pytest.mark.parametrize("vector", _params("text_to_message"))
def test_mem_16_vectors_through_the_text_node(vector: dict[str, Any]) -> None:
    given = vector["input"]
    inputs = {port: given.get(port) for port in ("text", "role", "tool_call_id")}
    out = create_node("text_to_message", None).process(inputs, CONTEXT)
    assert out == vector["expected"], vector["description"]
