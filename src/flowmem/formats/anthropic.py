"""Anthropic Messages (``system`` + ``messages``) ↔ flowmem rows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flowmem.core import Message
from flowmem.errors import (
    InvalidMessageError,
    UnknownRoleError,
    UnsupportedContentError,
)
from flowmem.formats._common import (
    flat_call,
    input_object,
    join_text,
    normalized,
    read_call,
    require_list,
    require_map,
    result_call_id,
)

SYSTEM_SEPARATOR = "\n\n"


def _push(out: list[dict[str, Any]], role: str, block: dict[str, Any]) -> None:
    """Add a block to the last message when it has the same role, else start a message."""
    if out and out[-1]["role"] == role:
        out[-1]["content"].append(block)
    else:
        out.append({"role": role, "content": [block]})


def to_anthropic(messages: object) -> tuple[str | None, list[dict[str, Any]]]:
    """Return ``messages`` (flowmem stored or flat rows) as Anthropic ``(system, messages)``.

    Normalizes first (MEM-5). System rows with text are joined into ``system``
    (``None`` when there is none). An assistant turn is a text block (when it has
    text) followed by ``tool_use`` blocks (``id``, ``name``, ``input`` object); each
    ``tool`` row is a ``tool_result`` block in the next user message, several
    results in one message, followed by the next user text. Consecutive same-role
    turns are merged into one message, as Anthropic requires. A message holding one
    text block is sent with string content. A user turn with empty text is left out
    (Anthropic rejects empty text blocks).
    """
    rows = normalized(messages)
    systems = [row["content"] for row in rows if row["role"] == "system" and row["content"] != ""]
    out: list[dict[str, Any]] = []
    for row in rows:
        role, content = row["role"], row["content"]
        if role == "user" and content != "":
            _push(out, "user", {"type": "text", "text": content})
        elif role == "assistant":
            if content != "":
                _push(out, "assistant", {"type": "text", "text": content})
            for raw in row.get("tool_calls") or []:
                call = read_call(raw)
                _push(
                    out,
                    "assistant",
                    {
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": input_object(call.args),
                    },
                )
        elif role == "tool":
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": row["tool_call_id"]}
            if content != "":
                block["content"] = content
            _push(out, "user", block)
    for message in out:
        blocks = message["content"]
        if len(blocks) == 1 and blocks[0]["type"] == "text":
            message["content"] = blocks[0]["text"]
    return (SYSTEM_SEPARATOR.join(systems) if systems else None), out


def _system_text(system: object) -> str:
    if system is None:
        return ""
    return join_text(system, ("text",), "system")


def _assistant_rows(blocks: list[Any], where: str) -> list[Message]:
    """Split an assistant message: each text block before any tool_use starts a row.

    ``tool_use`` blocks join the row before them (or a row with empty text); a text
    block after a ``tool_use`` is appended to that row's text, so the results that
    follow the message stay adjacent to their calls.
    """
    rows: list[Message] = []
    seen_call = False
    for n, raw in enumerate(blocks):
        at = f"{where}.content[{n}]"
        block = require_map(raw, at)
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise InvalidMessageError(f"{at}: text block without text")
            if seen_call:
                rows[-1]["content"] = "\n".join(t for t in (rows[-1]["content"], text) if t)
            else:
                rows.append({"role": "assistant", "content": text})
        elif kind == "tool_use":
            call = flat_call(block.get("id"), block.get("name"), block.get("input", {}), at)
            if not rows:
                rows.append({"role": "assistant", "content": ""})
            rows[-1].setdefault("tool_calls", []).append(call)
            seen_call = True
        else:
            raise UnsupportedContentError(
                f"{at}: assistant block of type {kind!r} cannot be carried by flowmem", block=kind
            )
    return rows


def _user_rows(blocks: list[Any], where: str) -> list[Message]:
    """Split a user message: each ``tool_result`` is a tool row, each text block a user row."""
    rows: list[Message] = []
    for n, raw in enumerate(blocks):
        at = f"{where}.content[{n}]"
        block = require_map(raw, at)
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise InvalidMessageError(f"{at}: text block without text")
            rows.append({"role": "user", "content": text})
        elif kind == "tool_result":
            rows.append(
                {
                    "role": "tool",
                    "content": join_text(block.get("content"), ("text",), at),
                    "tool_call_id": result_call_id(block.get("tool_use_id"), at),
                }
            )
        else:
            raise UnsupportedContentError(
                f"{at}: user block of type {kind!r} cannot be carried by flowmem", block=kind
            )
    return rows


def from_anthropic(system: object, messages: object) -> list[Message]:
    """Return Anthropic ``system`` + ``messages`` as flowmem flat rows (no normalization).

    ``system`` (a string or text blocks, or ``None``) becomes one leading system row
    when it has text. A message's text blocks, ``tool_use`` blocks and ``tool_result``
    blocks are split back into rows (see ``_assistant_rows``/``_user_rows``), which
    undoes the merging ``to_anthropic`` does. Raises ``InvalidMessageError`` for a
    malformed message and ``UnsupportedContentError`` for images, documents,
    thinking and other non-text blocks.
    """
    rows: list[Message] = []
    text = _system_text(system)
    if text != "":
        rows.append({"role": "system", "content": text})
    for index, raw in enumerate(require_list(messages, "messages")):
        where = f"message {index}"
        message: Mapping[str, Any] = require_map(raw, where)
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise UnknownRoleError(f"{where}: unknown role {role!r}", role=role)
        content = message.get("content")
        if isinstance(content, str):
            rows.append({"role": role, "content": content})
            continue
        if not isinstance(content, (list, tuple)):
            raise InvalidMessageError(f"{where}: content must be a string or a list of blocks")
        split = _assistant_rows if role == "assistant" else _user_rows
        rows.extend(split(list(content), where))
    return rows
