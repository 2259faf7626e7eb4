"""The tool registry: registration, schema validation, error results instead of crashes."""

from __future__ import annotations

import pytest

from flowmem.errors import ConfigurationError, ToolError
from flowmem.runtime.tools import ToolContext, ToolRegistry, parse_arguments

ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
CTX = ToolContext(context=None, service=None, call_id="c1")


def make_registry() -> ToolRegistry:
    registry = ToolRegistry()

    @registry.tool(schema=ADD_SCHEMA, description="Add two integers.")
    def add(a: int, b: int) -> int:
        return a + b

    return registry


def test_register_and_call_returns_text_content() -> None:
    registry = make_registry()
    outcome = registry.call("add", '{"a": 2, "b": 40}', CTX)
    assert outcome.content == "42"
    assert not outcome.error
    assert registry.names() == ["add"]


def test_specs_are_openai_function_declarations() -> None:
    spec = make_registry().specs()[0]
    assert spec == {
        "type": "function",
        "function": {"name": "add", "description": "Add two integers.", "parameters": ADD_SCHEMA},
    }


def test_unknown_tool_is_an_error_result_not_an_exception() -> None:
    outcome = make_registry().call("nope", {}, CTX)
    assert outcome.error and outcome.code == "tool_error"
    assert "unknown tool 'nope'" in outcome.content


@pytest.mark.parametrize(
    "arguments",
    ['{"a": 1}', '{"a": "x", "b": 2}', '{"a": 1, "b": 2, "c": 3}', "not json", "[1, 2]", 7],
)
def test_bad_arguments_are_an_error_result(arguments: object) -> None:
    outcome = make_registry().call("add", arguments, CTX)
    assert outcome.error
    assert outcome.content.startswith("error: ")


def test_a_tool_that_raises_is_an_error_result() -> None:
    registry = ToolRegistry()

    def boom() -> str:
        raise RuntimeError("disk on fire")

    registry.register("boom", boom)
    outcome = registry.call("boom", {}, CTX)
    assert outcome.error and outcome.code == "tool_failed"
    assert "disk on fire" in outcome.content


def test_tool_context_is_passed_only_to_tools_that_ask_for_it() -> None:
    registry = ToolRegistry()
    seen: list[ToolContext] = []

    def who(tool_context: ToolContext) -> str:
        seen.append(tool_context)
        return tool_context.call_id

    registry.register("who", who)
    assert registry.call("who", {}, CTX).content == "c1"
    assert seen == [CTX]


def test_non_string_results_are_serialized() -> None:
    registry = ToolRegistry()
    registry.register("obj", lambda: {"t": 18, "sky": "clear"})
    assert registry.call("obj", None, CTX).content == '{"t": 18, "sky": "clear"}'


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "dot.ted"])
def test_bad_tool_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigurationError):
        ToolRegistry().register(name, lambda: None)


def test_duplicate_name_and_bad_schema_are_refused() -> None:
    registry = make_registry()
    with pytest.raises(ConfigurationError):
        registry.register("add", lambda: None)
    with pytest.raises(ConfigurationError):
        registry.register("bad", lambda: None, {"type": "object", "properties": 3})
    with pytest.raises(ConfigurationError):
        registry.register("arr", lambda: None, {"type": "array"})


def test_get_unknown_raises_tool_error() -> None:
    with pytest.raises(ToolError):
        ToolRegistry().get("missing")


def test_parse_arguments() -> None:
    assert parse_arguments(None) == {}
    assert parse_arguments("") == {}
    assert parse_arguments({"a": 1}) == {"a": 1}
    assert parse_arguments('{"a": 1}') == {"a": 1}
    with pytest.raises(ToolError):
        parse_arguments('"text"')
