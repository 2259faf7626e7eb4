"""OpenAI Chat Completions messages ↔ flowmem rows."""

from __future__ import annotations

from typing import Any

from flowmem.core import Message
from flowmem.errors import InvalidMessageError, UnknownRoleError, UnsupportedContentError
from flowmem.formats._common import (
    arguments_text,
    flat_call,
    join_text,
    normalized,
    parse_arguments,
    read_call,
    require_list,
    require_map,
    result_call_id,
)

_TEXT = ("text",)


def to_openai(messages: object) -> list[dict[str, Any]]:
    """Return ``messages`` (flowmem stored or flat rows) as Chat Completions messages.

    Normalizes first (MEM-5), so the output is sendable: every ``tool_calls[].id``
    is answered by the ``tool`` message right after its turn. Arguments become a
    JSON string; an assistant turn with calls and no text has ``content: null``.
    """
    out: list[dict[str, Any]] = []
    for row in normalized(messages):
        role, content = row["role"], row["content"]
        if role == "tool":
            out.append({"role": "tool", "tool_call_id": row["tool_call_id"], "content": content})
            continue
        message: dict[str, Any] = {"role": role, "content": content}
        if role == "assistant" and row.get("tool_calls"):
            calls = [read_call(call) for call in row["tool_calls"]]
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": arguments_text(call.args)},
                }
                for call in calls
            ]
            if content == "":
                message["content"] = None
        out.append(message)
    return out


def _from_call(call: object, where: str) -> dict[str, Any]:
    entry = require_map(call, where)
    kind = entry.get("type", "function")
    if kind != "function":
        raise UnsupportedContentError(f"{where}: tool call of type {kind!r} is not a function call")
    function = require_map(entry.get("function"), f"{where}.function")
    raw = function.get("arguments", "")
    if not isinstance(raw, str):
        raise InvalidMessageError(f"{where}: function.arguments must be a JSON string")
    return flat_call(entry.get("id"), function.get("name"), parse_arguments(raw), where)


def from_openai(messages: object) -> list[Message]:
    """Return Chat Completions messages as flowmem flat rows (no normalization).

    ``developer`` becomes ``system``; text parts are joined with a newline; an
    assistant ``refusal`` stands in for empty content; each ``tool_calls[]`` entry
    becomes ``{"tool_call_id", "name", "args"}`` with the arguments parsed from JSON.
    Raises ``InvalidMessageError``/``UnknownRoleError`` for a malformed message and
    ``UnsupportedContentError`` for non-text content or a legacy ``function`` role.
    """
    rows: list[Message] = []
    for index, raw in enumerate(require_list(messages, "messages")):
        where = f"message {index}"
        message = require_map(raw, where)
        role = message.get("role")
        if role == "developer":
            role = "system"
        if role == "function" or message.get("function_call") is not None:
            raise UnsupportedContentError(f"{where}: legacy function calling is not supported")
        if role not in ("system", "user", "assistant", "tool"):
            raise UnknownRoleError(f"{where}: unknown role {role!r}", role=role)
        content = join_text(message.get("content"), _TEXT, where)
        row: Message = {"role": role, "content": content}
        if role == "assistant":
            refusal = message.get("refusal")
            if content == "" and isinstance(refusal, str):
                row["content"] = refusal
            calls = message.get("tool_calls")
            if calls:
                row["tool_calls"] = [
                    _from_call(call, f"{where}.tool_calls[{n}]")
                    for n, call in enumerate(require_list(calls, f"{where}.tool_calls"))
                ]
        elif role == "tool":
            row["tool_call_id"] = result_call_id(message.get("tool_call_id"), where)
        rows.append(row)
    return rows
