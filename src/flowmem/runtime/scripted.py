"""A rule-based scripted assistant for ``flowmem chat --scripted`` (no model provider needed).

It answers like a tiny agent over the built-in tools, and checks every history it
is sent the way a provider does (``ScriptedModel(check=True)``):

- ``remember KEY = VALUE`` → calls ``remember``; ``recall KEY`` → ``recall``;
  ``forget KEY`` → ``forget``; a message mentioning the time → ``current_time``;
- after tool results, it reports them; anything else is echoed back.

``PHRASES`` lists an example of each; ``flowmem chat --scripted`` prints them at its start.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any

from flowmem.core import Message
from flowmem.runtime.models import ModelReply, ScriptedModel, ToolCall

_REMEMBER = re.compile(r"^\s*remember\s+(?P<key>[^=]+?)\s*=\s*(?P<value>.+?)\s*$", re.I)
_RECALL = re.compile(r"^\s*(?P<verb>recall|forget)\s+(?P<key>.+?)\s*$", re.I)
_TIME = re.compile(r"\btime\b", re.I)

# What makes the scripted model call a tool: (an example you can type, the tool it calls).
# ``flowmem chat --scripted`` prints these when it starts; a test sends each one.
PHRASES: tuple[tuple[str, str], ...] = (
    ("remember color = blue", "remember"),
    ("recall color", "recall"),
    ("forget color", "forget"),
    ("what time is it?", "current_time"),
)


def phrases_hint() -> str:
    """One line naming the phrases that make the scripted model call each tool."""
    return "tool phrases: " + "  ".join(f"'{text}' → {tool}" for text, tool in PHRASES)


def _call(name: str, args: Mapping[str, Any]) -> ModelReply:
    return ModelReply("", (ToolCall(f"call_{uuid.uuid4().hex[:12]}", name, dict(args)),))


def respond(messages: list[Message], tools: list[dict[str, Any]]) -> ModelReply:
    """Answer the last message of ``messages`` by the rules in this module's docstring."""
    if not messages:
        return ModelReply("Hello!")
    last = messages[-1]
    if last.get("role") == "tool":
        results = []
        for row in reversed(messages):
            if row.get("role") != "tool":
                break
            results.append(str(row.get("content", "")))
        return ModelReply("Tool said: " + " | ".join(reversed(results)))
    text = str(last.get("content", ""))
    if match := _REMEMBER.match(text):
        return _call("remember", {"key": match["key"], "value": match["value"]})
    if match := _RECALL.match(text):
        return _call(match["verb"].lower(), {"key": match["key"]})
    if _TIME.search(text):
        return _call("current_time", {})
    return ModelReply(f"You said: {text}")


def scripted_assistant() -> ScriptedModel:
    """A ``ScriptedModel`` that answers every call with ``respond``, checking each history."""
    return ScriptedModel([], fallback=respond, check=True)
