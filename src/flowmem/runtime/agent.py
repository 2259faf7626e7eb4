"""An agent definition: a model, a system prompt, tools, its memory and a step limit."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from flowmem.errors import ConfigurationError
from flowmem.runtime.models import Model
from flowmem.runtime.tools import Tool, ToolRegistry
from flowmem.scope import NAME_MAX, SCOPES

MAX_KEY_LENGTH = NAME_MAX


@dataclass(frozen=True)
class MemorySpec:
    """Where an agent keeps its conversation: a scope, a key and a window (0 = unlimited)."""

    scope: str = "session"
    key: str = "chat_history"
    max_messages: int = 0

    def __post_init__(self) -> None:
        if self.scope not in SCOPES:
            raise ConfigurationError(
                f"memory scope {self.scope!r} is not one of {', '.join(SCOPES)}"
            )
        if not isinstance(self.key, str) or not 1 <= len(self.key) <= MAX_KEY_LENGTH:
            raise ConfigurationError("memory key must be a string of 1 to 255 characters")
        if (
            isinstance(self.max_messages, bool)
            or not isinstance(self.max_messages, int)
            or self.max_messages < 0
        ):
            raise ConfigurationError("memory max_messages must be an integer >= 0")

    def ports(self) -> dict[str, Any]:
        """Return the ``conversation_buffer`` node inputs that select this buffer."""
        return {"scope": self.scope, "key": self.key, "max_messages": self.max_messages}


def _registry(tools: ToolRegistry | Iterable[Tool] | None) -> ToolRegistry:
    if tools is None:
        return ToolRegistry()
    if isinstance(tools, ToolRegistry):
        return tools
    return ToolRegistry(list(tools))


@dataclass
class Agent:
    """What runs a session's turns: ``model`` answers, ``tools`` act, ``memory`` remembers.

    One turn calls the model at most ``max_steps`` times.
    """

    name: str
    model: Model
    system_prompt: str = ""
    tools: ToolRegistry = field(default_factory=ToolRegistry)
    memory: MemorySpec = field(default_factory=MemorySpec)
    max_steps: int = 8

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not 1 <= len(self.name) <= 200:
            raise ConfigurationError("agent name must be a string of 1 to 200 characters")
        if not callable(getattr(self.model, "complete", None)):
            raise ConfigurationError(f"agent {self.name!r}: model has no complete() method")
        if not isinstance(self.system_prompt, str):
            raise ConfigurationError(f"agent {self.name!r}: system_prompt must be a string")
        self.tools = _registry(self.tools)
        if not isinstance(self.memory, MemorySpec):
            raise ConfigurationError(f"agent {self.name!r}: memory must be a MemorySpec")
        if (
            isinstance(self.max_steps, bool)
            or not isinstance(self.max_steps, int)
            or self.max_steps < 1
        ):
            raise ConfigurationError(f"agent {self.name!r}: max_steps must be an integer >= 1")
