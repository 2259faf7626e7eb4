"""LangChain messages as flowmem rows, and back: ``row_to_message(message_to_row(m)) == m`` (decision 0021)."""

from __future__ import annotations

import copy
import functools
import json
import math
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    ChatMessageChunk,
    FunctionMessage,
    HumanMessage,
    HumanMessageChunk,
    RemoveMessage,
    SystemMessage,
    SystemMessageChunk,
    ToolMessage,
    ToolMessageChunk,
)
from pydantic import ValidationError

from flowmem.core import Message
from flowmem.errors import (
    InvalidMessageError,
    NotSerializableError,
    UnknownRoleError,
)
from flowmem.formats._common import input_object
from flowmem.integrations.langchain.blocks import (
    LANGCHAIN,
    block_to_part,
    fields_but,
    part_to_block,
)

# The message classes a row can come back as; a row names its class in
# ``extra.langchain.class`` only when it is not the default class of its role.
_CLASSES: dict[str, type[BaseMessage]] = {
    cls.__name__: cls
    for cls in (
        HumanMessage,
        HumanMessageChunk,
        AIMessage,
        AIMessageChunk,
        SystemMessage,
        SystemMessageChunk,
        ToolMessage,
        ToolMessageChunk,
        ChatMessage,
        ChatMessageChunk,
    )
}
_DEFAULT_CLASS = {
    "user": "HumanMessage",
    "assistant": "AIMessage",
    "system": "SystemMessage",
    "tool": "ToolMessage",
}
# ``ChatMessage.role`` values flowmem takes, and the row role each becomes
# (``developer`` is a system message, as in the OpenAI formats).
CHAT_ROLES: dict[str, str] = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "system": "system",
    "developer": "system",
}
# Fields a row models itself; every other field of a message goes to ``extra``.
_MODELED = frozenset({"content", "type", "tool_calls", "tool_call_id", "status"})
# Content blocks that repeat a call ``tool_calls``/``invalid_tool_calls`` carry:
# kept verbatim at their position in ``extra.langchain.blocks``, never as parts.
_CALL_BLOCKS = frozenset(
    {"tool_call", "tool_call_chunk", "invalid_tool_call", "tool_use", "function_call"}
)


# --- messages <-> rows -------------------------------------------------------------------


def edit_refused(message: RemoveMessage) -> InvalidMessageError:
    """The refusal of a ``RemoveMessage``: a flowmem history is append-only."""
    return InvalidMessageError(
        f"RemoveMessage(id={message.id!r}) cannot be applied: a flowmem history is "
        "append-only (rows are removed only by windowing, clear() or the store's "
        "retention); call clear() and add the messages to keep instead"
    )


def _role_of(message: BaseMessage) -> str:
    """Return the flowmem role of a LangChain message; raise for one flowmem cannot take."""
    if isinstance(message, RemoveMessage):
        raise edit_refused(message)
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, ToolMessage):
        return "tool"
    if isinstance(message, ChatMessage):
        role = CHAT_ROLES.get(message.role)
        if role is None:
            raise UnknownRoleError(
                f"ChatMessage role {message.role!r} is not one flowmem can store: use one of "
                f"{', '.join(sorted(CHAT_ROLES))}, or ToolMessage for a tool result",
                role=message.role,
            )
        return role
    if isinstance(message, FunctionMessage):
        raise InvalidMessageError(
            "FunctionMessage (the legacy OpenAI functions API) names no tool call id, "
            "so flowmem cannot pair it with its call: use ToolMessage(tool_call_id=...)"
        )
    raise InvalidMessageError(f"{type(message).__name__} is not a message flowmem can store")


@functools.cache
def _defaults(cls: type[BaseMessage]) -> tuple[tuple[str, Any], ...]:
    """Return ``(field, default)`` for the fields of a message class a row does not model."""
    return tuple(
        (name, info.get_default(call_default_factory=True))
        for name, info in cls.model_fields.items()
        if name not in _MODELED
    )


@functools.cache
def _all_defaults(cls: type[BaseMessage]) -> tuple[tuple[str, Any], ...]:
    """Every field of a message class with a default, and that default (computed once)."""
    return tuple(
        (name, info.get_default(call_default_factory=True))
        for name, info in cls.model_fields.items()
        if not info.is_required()
    )


def _fresh(value: Any) -> Any:
    """A default as a new object of its own: a list or dict is copied (never shared)."""
    return copy.deepcopy(value) if isinstance(value, (list, dict)) else value


def _unmodeled_fields(message: BaseMessage) -> dict[str, Any]:
    """Return the fields of a message a row does not model, each only when not its default."""
    fields: dict[str, Any] = {}
    for name, default in _defaults(type(message)):
        value = getattr(message, name)
        if name == "role" or value != default:
            fields[name] = value
    fields.update(message.model_extra or {})
    return fields


def _plain_json(value: Any) -> bool:
    """Return True when ``value`` is built only of types JSON gives back as they are."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is list:
        return all(_plain_json(item) for item in value)
    if kind is dict:
        return all(type(k) is str and _plain_json(v) for k, v in value.items())
    return False


def _checked_json(row: Message, message: BaseMessage) -> Message:
    """Return ``row`` when it survives JSON unchanged; raise ``NotSerializableError`` else."""
    if _plain_json(row):
        return row  # the common case, without encoding it
    try:
        same = json.loads(json.dumps(row, allow_nan=False)) == row
    except (TypeError, ValueError, RecursionError) as exc:
        raise NotSerializableError(
            f"{type(message).__name__} holds a value flowmem cannot store as JSON: {exc}",
            argument="messages",
        ) from exc
    if not same:
        raise NotSerializableError(
            f"{type(message).__name__} holds a value JSON would change (a tuple, a "
            "non-string key, a non-finite float ...): flowmem stores messages as JSON",
            argument="messages",
        )
    return row


def _parts_and_call_blocks(raw: str | list[Any]) -> tuple[str | list[dict[str, Any]], list[list[Any]]]:
    """A message's content as a row's (text, or parts), and its call blocks with their positions."""
    if isinstance(raw, str):
        return raw, []
    parts: list[dict[str, Any]] = []
    blocks: list[list[Any]] = []
    for index, block in enumerate(raw):
        if isinstance(block, dict) and block.get("type") in _CALL_BLOCKS:
            blocks.append([index, block])
        else:
            parts.append(block_to_part(block))
    return parts, blocks


def _call_entry(call: Mapping[str, Any]) -> dict[str, Any]:
    """A LangChain ``ToolCall`` as a flowmem call entry, what flowmem does not model in ``extra``."""
    entry: dict[str, Any] = {
        "tool_call_id": call.get("id"),
        "name": call["name"],
        "args": call["args"],
    }
    more = fields_but(call, "id", "name", "args", "type")
    if call.get("type", "tool_call") != "tool_call":
        more["type"] = call.get("type")
    if more:
        entry["extra"] = {LANGCHAIN: more}
    return entry


def message_to_row(message: BaseMessage) -> Message:
    """Return a LangChain message as a flowmem flat row, losing nothing.

    ``HumanMessage``→user, ``AIMessage``→assistant (``tool_calls`` become
    ``{"tool_call_id", "name", "args"}``), ``ToolMessage``→tool (``tool_call_id``;
    ``status="error"`` is ``is_error``), ``SystemMessage``→system, a ``ChatMessage``
    with a role in ``CHAT_ROLES`` (``developer`` is system); chunk classes too.
    List content becomes parts (``block_to_part``); call blocks in the content stay
    in ``extra.langchain.blocks`` at their position. Raises ``InvalidMessageError``
    for ``RemoveMessage`` and ``FunctionMessage``, ``UnknownRoleError`` for another
    ``ChatMessage`` role and ``NotSerializableError`` for a value JSON cannot keep.
    """
    role = _role_of(message)
    row: Message = {"role": role}
    lc: dict[str, Any] = {}
    row["content"], blocks = _parts_and_call_blocks(message.content)
    if blocks:
        lc["blocks"] = blocks
    if isinstance(message, AIMessage) and message.tool_calls:
        row["tool_calls"] = [_call_entry(call) for call in message.tool_calls]
    if isinstance(message, ToolMessage):
        row["tool_call_id"] = message.tool_call_id
        if message.status == "error":
            row["is_error"] = True
    if role == "assistant" and not row.get("tool_calls") and row["content"] in ("", []):
        attempts = _attempted_calls(message, lc)
        if attempts:
            # A turn whose every call failed to parse says what the model tried: with
            # no content it would be nothing to append (DESIGN §2) and the turn lost.
            lc["empty"] = row["content"]
            row["content"] = attempts
    if type(message).__name__ != _DEFAULT_CLASS[role]:
        lc["class"] = type(message).__name__
    fields = _unmodeled_fields(message)
    if fields:
        lc["fields"] = fields
    if lc:
        row["extra"] = {LANGCHAIN: lc}
    return _checked_json(row, message)


def _attempted_calls(message: BaseMessage, lc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Return the calls an AI turn tried and could not make, as ``provider`` parts.

    They stand in for the empty content of a turn that holds nothing else (its
    ``invalid_tool_calls``, else its call blocks); ``row_to_message`` restores the
    content from ``extra.langchain.empty``.
    """
    invalid = getattr(message, "invalid_tool_calls", None) or [block for _, block in lc.get("blocks", [])]
    return [{"type": "provider", "provider": LANGCHAIN, "block": dict(call)} for call in invalid]


def _read(row: Mapping[str, Any], key: str) -> Any:
    """Read a row key at the top level (a flat row), else under ``metadata`` (stored)."""
    if key in row:
        return row[key]
    meta = row.get("metadata")
    return meta.get(key) if isinstance(meta, Mapping) else None


def _content_of(row: Mapping[str, Any], lc: Mapping[str, Any]) -> Any:
    """A row's content as LangChain content: its parts as blocks, the call blocks put back."""
    content = lc["empty"] if "empty" in lc else row.get("content")  # see ``_attempted_calls``
    if isinstance(content, list):
        content = [part_to_block(part) for part in content]
    elif content is None:
        content = ""
    elif not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False)
    blocks = lc.get("blocks")
    if isinstance(blocks, list) and blocks:
        content = [] if content == "" else ([content] if isinstance(content, str) else content)
        for index, block in blocks:
            content.insert(index, block)
    return content


def _class_fields(
    cls: type[BaseMessage], row: Mapping[str, Any], role: str, given: Mapping[str, Any]
) -> dict[str, Any]:
    """The fields only some classes have: an AI turn's calls, a tool result's id and status, a role."""
    fields: dict[str, Any] = {}
    if issubclass(cls, AIMessage):
        calls = _read(row, "tool_calls") or []
        if calls:
            fields["tool_calls"] = [_lc_call(call) for call in calls]
    if issubclass(cls, ToolMessage):
        fields["tool_call_id"] = str(_read(row, "tool_call_id") or "")
        if _read(row, "is_error") is True:
            fields["status"] = "error"
    if issubclass(cls, ChatMessage) and "role" not in given:
        fields["role"] = role
    return fields


def row_to_message(row: Mapping[str, Any]) -> BaseMessage:
    """Return a flowmem row (flat or stored) as the LangChain message it was written from.

    A row written by ``message_to_row`` comes back equal (``==``); any other row
    comes back as the default class of its role, its parts as LangChain v1
    standard blocks (``provider`` parts as their block).
    """
    role = row.get("role") if isinstance(row, Mapping) else None
    if role not in _DEFAULT_CLASS:
        raise UnknownRoleError(f"not a flowmem message: {row!r}", role=role)
    extra = _read(row, "extra")
    lc = extra.get(LANGCHAIN) if isinstance(extra, Mapping) else None
    lc = lc if isinstance(lc, Mapping) else {}
    cls = _CLASSES.get(str(lc.get("class")), _CLASSES[_DEFAULT_CLASS[str(role)]])
    kwargs: dict[str, Any] = {"content": _content_of(row, lc), **dict(lc.get("fields") or {})}
    kwargs.update(_class_fields(cls, row, str(role), kwargs))
    try:
        validated = cls(**kwargs)
    except ValidationError as exc:
        raise InvalidMessageError(f"row is not a valid {cls.__name__}: {exc}") from exc
    if lc:
        # Written by ``message_to_row`` from a validated message: these are its field
        # values as they were. Validating them again can change them (an
        # ``AIMessageChunk`` re-derives its calls from its chunks), so, once they are
        # known to validate, they are set as they are.
        # the unset fields are handed over as the validated message has them: else
        # ``model_construct`` computes each default again, and pydantic inspects every
        # default factory's signature to do so (~200 µs a message)
        given = {name: _fresh(value) for name, value in _all_defaults(cls) if name not in kwargs}
        return cls.model_construct(_fields_set=set(kwargs), **given, **kwargs)
    return validated


def _lc_call(call: Mapping[str, Any]) -> dict[str, Any]:
    """Return a flowmem call entry as a LangChain ``ToolCall``."""
    extra = call.get("extra")
    more = extra.get(LANGCHAIN) if isinstance(extra, Mapping) else None
    cid = call.get("tool_call_id", call.get("id"))
    args = call.get("args")
    return {
        "name": call.get("name") or "",
        "args": {} if args is None else input_object(args),
        "id": cid if cid is None else str(cid),
        "type": "tool_call",
        **(dict(more) if isinstance(more, Mapping) else {}),
    }


__all__ = ["CHAT_ROLES", "edit_refused", "message_to_row", "row_to_message"]
