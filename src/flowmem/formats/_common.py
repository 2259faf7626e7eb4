"""Helpers shared by the provider formats: reading flowmem tool calls and text parts."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from flowmem.core import Message, entry_id, normalize
from flowmem.errors import InvalidInputError, InvalidMessageError, UnsupportedContentError


class ToolCall(NamedTuple):
    """One tool call read from either spelling: its id, function name and arguments."""

    id: str
    name: str
    args: Any


def normalized(messages: object) -> list[Message]:
    """Return the MEM-5 normalized flat rows of ``messages`` (stored or flat rows).

    Raises ``InvalidInputError`` when ``messages`` is not a list.
    """
    if not isinstance(messages, (list, tuple)):
        raise InvalidInputError(f"messages must be a list, got {type(messages).__name__}")
    return normalize(list(messages)).messages


def _function(call: Mapping[str, Any]) -> Mapping[str, Any]:
    function = call.get("function")
    return function if isinstance(function, Mapping) else {}


def parse_arguments(text: str) -> Any:
    """Return the JSON value of a provider's arguments string, or the string when it is not JSON.

    A blank string (some models send one for a call without arguments) is ``{}``.
    """
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return text


def read_call(call: Mapping[str, Any]) -> ToolCall:
    """Read one tool call entry of a normalized row, in flowmem's or a provider's spelling.

    The id is read by ``flowmem.core.entry_id`` (``tool_call_id`` first, else ``id``);
    the name from ``name`` or ``function.name``; the arguments from ``args``,
    ``input``, ``arguments`` or ``function.arguments`` (a JSON string is parsed).
    Normalized rows only hold calls with a usable id.
    """
    cid = entry_id(call)
    if cid is None:
        raise InvalidMessageError("tool call has no usable id")
    function = _function(call)
    name = call.get("name", function.get("name"))
    if "args" in call:
        args = call["args"]
    elif "input" in call:
        args = call["input"]
    else:
        raw = call.get("arguments", function.get("arguments"))
        args = parse_arguments(raw) if isinstance(raw, str) else raw
    return ToolCall(cid, name if isinstance(name, str) else "", {} if args is None else args)


def arguments_text(args: Any) -> str:
    """Return ``args`` as the JSON arguments string OpenAI formats carry.

    A string passes as is (it already is the arguments text), except a blank one,
    which is ``"{}"`` like a call without arguments.
    """
    if isinstance(args, str):
        return args if args.strip() else "{}"
    try:
        return json.dumps(args, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return "{}"


def input_object(args: Any) -> dict[str, Any]:
    """Return ``args`` as the JSON object Anthropic's ``tool_use.input`` requires.

    An object passes as is; a string holding a JSON object is parsed; any other value
    is wrapped as ``{"value": args}`` (a documented loss, ``docs/formats.md``).
    """
    if isinstance(args, Mapping):
        return dict(args)
    if isinstance(args, str):
        parsed = parse_arguments(args)
        if isinstance(parsed, dict):
            return parsed
    return {"value": args}


def flat_call(cid: object, name: object, args: Any, where: str) -> dict[str, Any]:
    """Return a flowmem tool call entry ``{"tool_call_id", "name", "args"}``; raise on a bad id or name."""
    if isinstance(cid, bool) or not isinstance(cid, (str, int)) or not str(cid).strip():
        raise InvalidMessageError(f"{where}: tool call has no id")
    if not isinstance(name, str):
        raise InvalidMessageError(f"{where}: tool call has no function name")
    return {"tool_call_id": str(cid).strip(), "name": name, "args": args}


def result_call_id(cid: object, where: str) -> str:
    """Return the id a provider's tool result answers; raise ``InvalidMessageError`` when absent."""
    if isinstance(cid, bool) or not isinstance(cid, (str, int)) or not str(cid).strip():
        raise InvalidMessageError(f"{where}: tool result has no tool call id")
    return str(cid).strip()


def join_text(
    content: object, text_types: Iterable[str], where: str, text_key: str = "text"
) -> str:
    """Return the text of provider content: a string, ``None`` (empty) or a list of text parts.

    Text parts (``type`` in ``text_types``) are joined with a newline; ``refusal``
    parts contribute their refusal text. Any other part (an image, a file, audio)
    raises ``UnsupportedContentError``: flowmem content is text.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, (list, tuple)):
        raise InvalidMessageError(
            f"{where}: content must be a string or a list of parts, got {type(content).__name__}"
        )
    kinds = set(text_types)
    texts: list[str] = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, Mapping):
            raise InvalidMessageError(f"{where}: a content part must be an object")
        kind = part.get("type")
        if kind in kinds and isinstance(part.get(text_key), str):
            texts.append(part[text_key])
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            texts.append(part["refusal"])
        else:
            raise UnsupportedContentError(
                f"{where}: content part of type {kind!r} cannot be carried as text", part=kind
            )
    return "\n".join(texts)


def require_list(value: object, what: str) -> list[Any]:
    """Return ``value`` as a list; raise ``InvalidInputError`` naming ``what`` otherwise."""
    if not isinstance(value, (list, tuple)):
        raise InvalidInputError(f"{what} must be a list, got {type(value).__name__}")
    return list(value)


def require_map(value: object, where: str) -> Mapping[str, Any]:
    """Return ``value`` as a map; raise ``InvalidMessageError`` naming ``where`` otherwise."""
    if not isinstance(value, Mapping):
        raise InvalidMessageError(f"{where}: must be an object, got {type(value).__name__}")
    return value
