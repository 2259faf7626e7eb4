"""OpenAI Responses API / Agents SDK input items ↔ flowmem rows."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from flowmem.core import Message, entry_id, result_id, to_flat
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

_TEXT = ("input_text", "output_text", "text")


def row_to_items(row: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Return the Responses items of one flowmem row (flat or stored), without normalizing.

    A ``tool`` row is one ``function_call_output`` item; any other row is a
    ``message`` item (left out for an assistant turn with calls and no text)
    followed, for an assistant turn, by one ``function_call`` item per call with a
    usable id. Raises ``UnknownRoleError`` for an entry that is not a message.
    """
    flat = to_flat(row)
    if flat is None:
        raise UnknownRoleError(f"not a flowmem message: {row!r}")
    role, content = flat["role"], flat["content"]
    if role == "tool":
        call_id = result_id(flat)
        return [{"type": "function_call_output", "call_id": call_id or "", "output": content}]
    calls = [read_call(call) for call in flat.get("tool_calls") or [] if entry_id(call)]
    items: list[dict[str, Any]] = []
    if content != "" or not calls:
        items.append({"type": "message", "role": role, "content": content})
    items.extend(
        {
            "type": "function_call",
            "call_id": call.id,
            "name": call.name,
            "arguments": arguments_text(call.args),
        }
        for call in calls
    )
    return items


def to_responses(messages: object) -> list[dict[str, Any]]:
    """Return ``messages`` (flowmem stored or flat rows) as Responses input items.

    Normalizes first (MEM-5). A text turn is a ``message`` item with string
    content; an assistant turn's calls follow its text as ``function_call`` items
    (``call_id``, ``name``, ``arguments`` as a JSON string); a ``tool`` row is a
    ``function_call_output`` item.
    """
    return [item for row in normalized(messages) for item in row_to_items(row)]


def _message_row(item: dict[str, Any] | Any, where: str) -> Message:
    role = item.get("role")
    if role == "developer":
        role = "system"
    if role not in ("system", "user", "assistant"):
        raise UnknownRoleError(f"{where}: unknown message role {role!r}", role=role)
    return {"role": role, "content": join_text(item.get("content"), _TEXT, where)}


def _output_text(output: object, where: str) -> str:
    if isinstance(output, str):
        return output
    return join_text(output, _TEXT, where)


def from_responses(items: object, *, ignore_types: Collection[str] = ()) -> list[Message]:
    """Return Responses input items as flowmem flat rows (no normalization).

    A ``message`` item (or an item with a ``role`` and no ``type``) is one row;
    ``developer`` becomes ``system``; ``input_text``/``output_text`` parts are joined
    with a newline. A run of ``function_call`` items joins the assistant row right
    before it (the text of the same model turn), else starts an assistant row with
    empty content. A ``function_call_output`` is a ``tool`` row. Items whose type is
    in ``ignore_types`` are skipped; any other item type (reasoning, built-in tool
    calls, references) raises ``UnsupportedContentError``.
    """
    rows: list[Message] = []
    for index, raw in enumerate(require_list(items, "items")):
        where = f"item {index}"
        item = require_map(raw, where)
        kind = item.get("type", "message" if "role" in item else None)
        if kind in ignore_types:
            continue
        if kind == "message":
            rows.append(_message_row(item, where))
        elif kind == "function_call":
            raw_args = item.get("arguments", "")
            if not isinstance(raw_args, str):
                raise InvalidMessageError(f"{where}: arguments must be a JSON string")
            call = flat_call(
                item.get("call_id"), item.get("name"), parse_arguments(raw_args), where
            )
            last = rows[-1] if rows else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                rows.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            rows.append(
                {
                    "role": "tool",
                    "content": _output_text(item.get("output"), where),
                    "tool_call_id": result_call_id(item.get("call_id"), where),
                }
            )
        else:
            raise UnsupportedContentError(
                f"{where}: item of type {kind!r} cannot be carried by flowmem", item_type=kind
            )
    return rows
