"""Tools an agent may call: Python callables with a name, a description and a JSON schema.

A tool is registered in a ``ToolRegistry`` (``register`` or the ``tool`` decorator).
Arguments are validated against the tool's JSON schema (``jsonschema``) before the
callable runs. An unknown tool, arguments that do not validate, or a callable that
raises all become an *error result* for that one call (``ToolOutcome.error``), never
a crashed turn.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from flowmem.core import coerce_content
from flowmem.errors import ConfigurationError, ToolError
from flowmem.scope import ExecutionContext
from flowmem.service import MemoryService

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_EMPTY_SCHEMA: Mapping[str, Any] = {"type": "object", "properties": {}}

EMPTY_RESULT = "(the tool returned no output)"

# The parameter name through which a tool receives its ``ToolContext``.
CONTEXT_PARAMETER = "tool_context"


@dataclass(frozen=True)
class ToolContext:
    """What a running tool may know: the turn's execution context and the memory service.

    ``context`` is the turn's ``ExecutionContext`` (its user is the session owner,
    MEM-8); ``service`` is the ``MemoryService`` the turn runs on, so a tool can use
    the memory nodes (``node``) under the same identity as the turn.
    """

    context: ExecutionContext | None
    service: MemoryService | None
    call_id: str
    session_id: str | None = None

    def node(self, type_id: str, config: Mapping[str, Any] | None = None) -> Any:
        """Return the workflow node ``type_id`` bound to this turn's memory service."""
        from flowmem.nodes import create_node

        return create_node(type_id, self.service, dict(config) if config else None)


@dataclass(frozen=True)
class ToolOutcome:
    """The result of one tool call: its text content, and whether it is an error result."""

    content: str
    error: bool = False
    code: str | None = None


@dataclass(frozen=True)
class Tool:
    """One registered tool."""

    name: str
    fn: Callable[..., Any]
    schema: Mapping[str, Any] = field(default_factory=lambda: dict(_EMPTY_SCHEMA))
    description: str = ""

    @property
    def wants_context(self) -> bool:
        """True when the callable takes a ``tool_context`` parameter."""
        try:
            return CONTEXT_PARAMETER in inspect.signature(self.fn).parameters
        except (TypeError, ValueError):
            return False

    def spec(self) -> dict[str, Any]:
        """Return the tool as an OpenAI-style function declaration."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.schema),
            },
        }


def parse_arguments(arguments: object) -> dict[str, Any]:
    """Return a call's arguments as a dict: a dict stays, JSON object text is parsed.

    ``None`` and ``""`` are no arguments. Anything else raises ``ToolError``.
    """
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ToolError(f"arguments are not valid JSON: {exc}") from exc
        if isinstance(parsed, dict):
            return parsed
    raise ToolError(f"arguments must be a JSON object, got {type(arguments).__name__}")


class ToolRegistry:
    """Tools by name; validates arguments and turns every failure into an error result."""

    def __init__(self, tools: list[Tool] | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        for item in tools or []:
            self.add(item)

    def add(self, item: Tool) -> Tool:
        """Register a ``Tool``; a bad name, schema or a duplicate name is a ConfigurationError."""
        if not isinstance(item.name, str) or not _NAME.match(item.name):
            raise ConfigurationError(
                f"tool name {item.name!r} must be 1-64 letters, digits, '_' or '-'"
            )
        if not callable(item.fn):
            raise ConfigurationError(f"tool {item.name!r} is not callable")
        if not isinstance(item.schema, Mapping) or item.schema.get("type", "object") != "object":
            raise ConfigurationError(f"tool {item.name!r}: the schema must be an object schema")
        try:
            jsonschema.Draft202012Validator.check_schema(dict(item.schema))
        except jsonschema.SchemaError as exc:
            raise ConfigurationError(f"tool {item.name!r}: invalid schema: {exc.message}") from exc
        if item.name in self._tools:
            raise ConfigurationError(f"tool {item.name!r} is already registered")
        self._tools[item.name] = item
        return item

    def register(
        self,
        name: str,
        fn: Callable[..., Any],
        schema: Mapping[str, Any] | None = None,
        description: str = "",
    ) -> Tool:
        """Register ``fn`` as the tool ``name`` with a JSON schema for its arguments."""
        doc = description or (inspect.getdoc(fn) or "").split("\n", 1)[0]
        return self.add(Tool(name, fn, dict(schema) if schema else dict(_EMPTY_SCHEMA), doc))

    def tool(
        self,
        name: str | None = None,
        schema: Mapping[str, Any] | None = None,
        description: str = "",
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator form of ``register``; the name defaults to the function's name."""

        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.register(name or fn.__name__, fn, schema, description)
            return fn

        return decorate

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def names(self) -> list[str]:
        """Return the registered tool names in registration order."""
        return list(self._tools)

    def get(self, name: str) -> Tool:
        """Return the tool ``name``; raise ``ToolError`` when no such tool is registered."""
        found = self._tools.get(name)
        if found is None:
            raise ToolError(f"unknown tool {name!r}", tool=name)
        return found

    def specs(self) -> list[dict[str, Any]]:
        """Return every tool as an OpenAI-style function declaration."""
        return [item.spec() for item in self._tools.values()]

    def validate(self, name: str, arguments: object) -> dict[str, Any]:
        """Return the parsed arguments for tool ``name``; raise ``ToolError`` when they do not fit."""
        item = self.get(name)
        args = parse_arguments(arguments)
        validator = jsonschema.Draft202012Validator(dict(item.schema))
        errors = sorted(validator.iter_errors(args), key=lambda e: list(e.absolute_path))
        if errors:
            first = errors[0]
            where = "/".join(str(p) for p in first.absolute_path) or "(arguments)"
            raise ToolError(f"invalid arguments for {name!r} at {where}: {first.message}")
        return args

    def call(self, name: str, arguments: object, tool_context: ToolContext) -> ToolOutcome:
        """Validate and run one call; every failure becomes an error outcome, never an exception."""
        try:
            args = self.validate(name, arguments)
        except ToolError as exc:
            return ToolOutcome(f"error: {exc.message}", error=True, code=exc.code)
        item = self._tools[name]
        kwargs = dict(args)
        if item.wants_context:
            kwargs[CONTEXT_PARAMETER] = tool_context
        try:
            value = item.fn(**kwargs)
        except Exception as exc:  # a tool that raises answers its call with an error result
            return ToolOutcome(
                f"error: tool {name!r} failed: {type(exc).__name__}: {exc}",
                error=True,
                code="tool_failed",
            )
        # An empty result would not be stored (an empty tool row is skipped), leaving the
        # call unanswered: say so in words instead.
        return ToolOutcome(coerce_content(value) or EMPTY_RESULT)
