"""Run every JSON vector through the pure core, one test function per rule."""

from __future__ import annotations

import re
from typing import Any

import pytest

from flowmem.core import append, assemble, normalize, repair_tool_pairing, text_to_message
from flowmem.errors import FlowmemError
from tests.vectors import OPERATIONS, load_vectors

ALL = load_vectors()
RULES_COVERED = (
    "MEM-1",
    "MEM-2",
    "MEM-3",
    "MEM-4",
    "MEM-5",
    "MEM-10",
    "MEM-11",
    "MEM-14",
    "MEM-16",
)


def run(vector: dict[str, Any]) -> dict[str, Any]:
    """Run one vector's operation on its input; return what it produced, shaped like ``expected``."""
    given = vector["input"]
    operation = vector["operation"]
    if operation == "append":
        try:
            result = append(
                given["buffer"],
                given["messages"],
                max_messages=given.get("max_messages", 0),
                now=None,
            )
        except FlowmemError as exc:
            return {"error": exc.code}
        return result.to_dict()
    if operation in ("normalize", "repair"):
        fn = normalize if operation == "normalize" else repair_tool_pairing
        messages, dropped = fn(given["messages"])
        return {"messages": messages, "dropped": dropped}
    if operation == "text_to_message":
        out = text_to_message(given["text"], given.get("role"), given.get("tool_call_id"))
        return {"messages": out.messages, "message": out.message}
    if operation == "assemble":
        return {"messages": assemble(*given["inputs"])}
    raise ValueError(f"unknown operation {operation!r}")


def of_rule(rule: str | None) -> list[Any]:
    return [pytest.param(vector, id=name) for name, vector in ALL if vector["rule"] == rule]


def check(vector: dict[str, Any]) -> None:
    assert run(vector) == vector["expected"], vector["description"]


@pytest.mark.parametrize("vector", of_rule("MEM-1"))
def test_mem_1_vectors(vector: dict[str, Any]) -> None:
    check(vector)


@pytest.mark.parametrize("vector", of_rule("MEM-2"))
def test_mem_2_vectors(vector: dict[str, Any]) -> None:
    check(vector)


@pytest.mark.parametrize("vector", of_rule("MEM-3"))
def test_mem_3_vectors(vector: dict[str, Any]) -> None:
    check(vector)


@pytest.mark.parametrize("vector", of_rule("MEM-4"))
def test_mem_4_vectors(vector: dict[str, Any]) -> None:
    check(vector)


@pytest.mark.parametrize("vector", of_rule("MEM-5"))
def test_mem_5_vectors(vector: dict[str, Any]) -> None:
    check(vector)


@pytest.mark.parametrize("vector", of_rule("MEM-10"))
def test_mem_10_vectors(vector: dict[str, Any]) -> None:
    check(vector)


@pytest.mark.parametrize("vector", of_rule("MEM-11"))
def test_mem_11_vectors(vector: dict[str, Any]) -> None:
    check(vector)


@pytest.mark.parametrize("vector", of_rule("MEM-14"))
def test_mem_14_vectors(vector: dict[str, Any]) -> None:
    check(vector)


@pytest.mark.parametrize("vector", of_rule("MEM-16"))
def test_mem_16_vectors(vector: dict[str, Any]) -> None:
    check(vector)


@pytest.mark.parametrize("vector", of_rule(None))
def test_bad_input_vectors(vector: dict[str, Any]) -> None:
    check(vector)


def test_vector_set_is_well_formed() -> None:
    assert len(ALL) >= 40
    names = [name for name, _ in ALL]
    assert len(names) == len(set(names))
    for name, vector in ALL:
        assert set(vector) == {"rule", "description", "operation", "input", "expected"}, name
        assert vector["operation"] in OPERATIONS, name
        rule = vector["rule"]
        if rule is None:
            assert name.startswith("input-") and "error" in vector["expected"], name
        else:
            assert rule in RULES_COVERED, name
            assert re.fullmatch(rf"{rule.lower()}-[a-z0-9-]+", name), name
    for rule in RULES_COVERED:
        assert of_rule(rule), f"no vector for {rule}"


def test_append_vectors_report_all_four_fields() -> None:
    for name, vector in load_vectors("append"):
        expected = vector["expected"]
        if "error" in expected:
            continue
        assert set(expected) == {"messages", "count", "appended", "appended_any"}, name
        assert expected["count"] == len(expected["messages"]), name
        assert expected["appended_any"] == (expected["appended"] > 0), name


def test_load_vectors_filters_by_operation() -> None:
    for operation in OPERATIONS:
        picked = load_vectors(operation)
        assert picked
        assert all(v["operation"] == operation for _, v in picked)
    assert sum(len(load_vectors(op)) for op in OPERATIONS) == len(ALL)
    with pytest.raises(ValueError):
        load_vectors("nope")
