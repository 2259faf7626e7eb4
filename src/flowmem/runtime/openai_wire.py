"""Flat flowmem rows ⇄ the OpenAI chat-completions wire format (what ``OpenAIChatModel`` sends).

Used by the runtime only; ``flowmem.formats`` holds the public converters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from flowmem.core import Message, coerce_content, entry_id, result_id
from flowmem.core.messages import raw_tool_calls


def _call_name(call: Mapping[str, Any]) -> str:
    function = call.get("function")
    if isinstance(function, Mapping) and isinstance(function.get("name"), str):
        return str(function["name"])
    name = call.get("name")
    return name if isinstance(name, str) else ""


def _call_arguments(call: Mapping[str, Any]) -> str:
    function = call.get("function")
    if isinstance(function, Mapping) and "arguments" in function:
        raw = function["arguments"]
    else:
        raw = call.get("args", call.get("arguments", {}))
    if isinstance(raw, str):
        return raw
    try:
        return json.dumps({} if raw is None else raw, ensure_ascii=False)
    except (TypeError, ValueError):
        return "{}"


def to_openai_message(row: Mapping[str, Any]) -> dict[str, Any]:
    """Convert one flat (or stored) row to an OpenAI chat message."""
    role = row.get("role")
    content = coerce_content(row.get("content"))
    if role == "assistant":
        calls = [c for c in raw_tool_calls(row) if isinstance(c, Mapping) and entry_id(c)]
        if calls:
            return {
                "role": "assistant",
                "content": content or None,
                "tool_calls": [
                    {
                        "id": entry_id(c),
                        "type": "function",
                        "function": {"name": _call_name(c), "arguments": _call_arguments(c)},
                    }
                    for c in calls
                ],
            }
        return {"role": "assistant", "content": content}
    if role == "tool":
        return {"role": "tool", "tool_call_id": result_id(row) or "", "content": content}
    return {"role": str(role), "content": content}


def to_openai_messages(rows: list[Message]) -> list[dict[str, Any]]:
    """Convert a list of flat rows to OpenAI chat messages, in order."""
    return [to_openai_message(row) for row in rows]
