"""Message shapes and the single readers of tool call ids (MEM-11).

Two shapes exist (DESIGN.md §1): the *stored row* a buffer holds, with tool data
under ``metadata``, and the *flat row* a provider consumes, with ``tool_calls`` /
``tool_call_id`` at the top level. Every function here reads both shapes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeGuard

from flowmem.errors import InvalidMessageError, UnknownRoleError

ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")
HEALED_CONTENT = "Tool call was interrupted; no result."

# Tool call kinds (decision 0021). A call entry without ``kind`` is a ``function``
# call; an unknown kind is treated like one (its result can be text).
CALL_KINDS: tuple[str, ...] = (
    "function",
    "custom",
    "computer",
    "local_shell",
    "shell",
    "apply_patch",
    "mcp_approval",
)
# Kinds whose result cannot be a text placeholder (a screenshot, a human decision):
# provider normalization removes them, rather than heals them, when unanswered.
UNTEXTABLE_KINDS: frozenset[str] = frozenset({"computer", "mcp_approval"})

Message = dict[str, Any]

# Keys with a meaning of their own; every other top-level key of an incoming
# message is kept under the stored row's metadata.
_ROW_KEYS = frozenset({"role", "content", "metadata", "timestamp", "tool_calls", "tool_call_id"})


def usable_call_id(value: object) -> str | None:
    """Return the tool call id as a string if it is usable, else None.

    Usable: a ``str`` or ``int`` (never ``bool``), non-empty after trimming, and not
    ``"0"``/``0``, which the reference treats as absent (DESIGN.md §1).
    """
    if type(value) is str:  # the common case first: normalize reads every id here
        text = value.strip()
        return text if text and text != "0" else None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        return None
    text = str(value).strip()
    if not text or text == "0":
        return None
    return text


def _metadata(message: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = message.get("metadata")
    # ``dict`` first: a C check that ends the test, where ``Mapping``'s runs Python (abc)
    return meta if isinstance(meta, (dict, Mapping)) else {}


def raw_tool_calls(message: Mapping[str, Any]) -> list[Any]:
    """Return the tool call entries a message carries (top level first, else metadata)."""
    calls = message.get("tool_calls")
    if calls is None:
        calls = _metadata(message).get("tool_calls")
    return list(calls) if isinstance(calls, list) else []


def entry_id(call: object) -> str | None:
    """Return the usable id of one tool call entry: ``tool_call_id`` first, else ``id``.

    Implements MEM-11: the one definition of a call's id, read under either spelling.
    """
    if not isinstance(call, (dict, Mapping)):
        return None
    first = call.get("tool_call_id")  # None is not usable: no call to say so
    if first is not None:
        first = usable_call_id(first)
        if first is not None:
            return first
    second = call.get("id")
    return None if second is None else usable_call_id(second)


def given_result_id(entry: Mapping[str, Any]) -> Any:
    """Return the id a tool entry gives for the call it answers: top level first, else metadata."""
    given = entry.get("tool_call_id")
    if given is None:
        meta = entry.get("metadata")
        if isinstance(meta, Mapping):
            given = meta.get("tool_call_id")
    return given


def given_calls(entry: Mapping[str, Any]) -> Any:
    """Return the calls an assistant entry gives: top level first, else metadata (None if none)."""
    calls = entry.get("tool_calls")
    if calls is None and "metadata" in entry:
        calls = raw_tool_calls(entry)
    return calls


def call_ids(message: Mapping[str, Any]) -> list[str]:
    """Return the usable tool call ids an assistant turn declares, in order, each once.

    Implements MEM-11: dedup, dangling-call detection, id recording and repair all
    read declared ids through this function (and ``entry_id``), so they cannot disagree.
    Non-assistant messages declare nothing.
    """
    if not isinstance(message, (dict, Mapping)) or message.get("role") != "assistant":
        return []
    calls = message.get("tool_calls")  # as ``raw_tool_calls`` reads them, without its copy
    if calls is None:
        calls = _metadata(message).get("tool_calls")
    if not isinstance(calls, list) or not calls:
        return []
    # a dict keeps the first occurrence's order and tests membership in O(1): a
    # turn declaring n calls costs O(n), not O(n²) (issue 24 §1)
    seen: dict[str, None] = {}
    for call in calls:
        cid = entry_id(call)
        if cid is not None:
            seen.setdefault(cid, None)
    return list(seen)


def result_id(message: Mapping[str, Any]) -> str | None:
    """Return the usable tool call id a ``tool`` row answers (top level first, else metadata)."""
    if not isinstance(message, (dict, Mapping)) or message.get("role") != "tool":
        return None
    given = message.get("tool_call_id")  # None is not usable: no call to say so
    found = None if given is None else usable_call_id(given)
    if found is None:
        given = _metadata(message).get("tool_call_id")
        found = None if given is None else usable_call_id(given)
    return found


def is_healed(message: Mapping[str, Any]) -> bool:
    """Return True when a row is a synthetic healed placeholder (``metadata.healed``)."""
    return _metadata(message).get("healed") is True or message.get("healed") is True


def coerce_content(content: object) -> str:
    """Coerce message content to text, as MEM-5 step 1 and MEM-16 require.

    A string stays; ``None`` is empty; a bool is ``"true"``/``"false"``; an integer is
    cast; a float and anything else is serialized to JSON text, falling back to
    ``""`` when it cannot be serialized (NaN and infinities included, decision 0001).
    """
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, bool):
        return "true" if content else "false"
    if isinstance(content, int):
        return str(content)
    try:
        return json.dumps(content, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return ""


def call_kind(call: object) -> str:
    """Return a tool call entry's kind: its ``kind`` when a non-empty string, else ``function``."""
    kind = call.get("kind") if isinstance(call, Mapping) else None
    return kind if isinstance(kind, str) and kind else "function"


def is_parts(content: object) -> TypeGuard[list[Any]]:
    """Return True when ``content`` is a list of parts: objects each with a string ``type``."""
    if type(content) is not list:
        return False
    for part in content:
        if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
            return False
    return True


def is_empty_content(content: object) -> bool:
    """Return True for empty content: ``""``, ``None`` or an empty list of parts."""
    return content is None or content == "" or (type(content) is list and not content)


def row_content(content: object) -> str | list[dict[str, Any]]:
    """Return the content a stored row keeps: a string, or a copied list of parts.

    A list of objects is content parts (decision 0021): each must carry a string
    ``type``, else ``InvalidMessageError``; the list and each part are copied (one
    level), so the row shares neither with the input. A list holding no object at
    all (``[1, 2]``) is not parts and is serialized to text like every other
    non-string value (``coerce_content``), as before parts existed.
    """
    if type(content) is not list:
        return coerce_content(content)
    if not content:
        return []
    if not any(isinstance(part, Mapping) for part in content):
        return coerce_content(content)
    parts: list[dict[str, Any]] = []
    for index, part in enumerate(content):
        if not isinstance(part, Mapping):
            raise InvalidMessageError(
                f"content part {index} must be an object, got {type(part).__name__}"
            )
        if not isinstance(part.get("type"), str):
            raise InvalidMessageError(f"content part {index} must have a string 'type'")
        parts.append(dict(part))
    return parts


def healed_row(call_id: str, timestamp: object = None) -> Message:
    """Return the stored healed placeholder answering ``call_id`` (MEM-3).

    ``timestamp`` (the healing user turn's, when it has one) is stamped on it.
    """
    row: Message = {
        "role": "tool",
        "content": HEALED_CONTENT,
        "metadata": {"tool_call_id": call_id, "healed": True},
    }
    if isinstance(timestamp, int) and not isinstance(timestamp, bool):
        row["timestamp"] = timestamp
    return row


def healed_flat(call_id: str) -> Message:
    """Return the flat synthetic interrupted result that repair inserts (MEM-5)."""
    return {"role": "tool", "content": HEALED_CONTENT, "tool_call_id": call_id}


def to_row(message: object, now: int | None = None) -> Message:
    """Convert one incoming message (flat or stored shape) to a stored row.

    Raises ``InvalidMessageError`` for a non-map, metadata that is not a map, tool
    calls that are not a list of maps, or content parts that are not objects with a
    string ``type``, and ``UnknownRoleError`` for a missing or unknown role.
    Content stays a string or a list of parts (``row_content``); other values are
    coerced to text. Top-level ``tool_calls``/``tool_call_id`` move under
    ``metadata``; other unknown top-level keys (``is_error``, ``extra``, ``name`` …)
    are kept there too. Tool call entries (with their ``kind`` and ``extra``) and
    parts are copied, so the row shares no list with the input.
    """
    if not isinstance(message, Mapping):
        raise InvalidMessageError(f"a message must be an object, got {type(message).__name__}")
    role = _checked_role(message)
    meta = _row_metadata(message, role)
    row: Message = {"role": role, "content": row_content(message.get("content")), "metadata": meta}
    stamp = message.get("timestamp")
    if isinstance(stamp, int) and not isinstance(stamp, bool):
        row["timestamp"] = stamp
    elif now is not None:
        row["timestamp"] = now
    return row


def _checked_role(message: Mapping[str, Any]) -> str:
    """Return a message's role; raise ``UnknownRoleError`` when it is missing or unknown."""
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise UnknownRoleError(
            f"unknown message role {role!r}: expected one of {', '.join(ROLES)}", role=role
        )
    return role


def _row_metadata(message: Mapping[str, Any], role: str) -> dict[str, Any]:
    """Return a row's metadata: the message's, its unknown top-level keys, and its call fields.

    Top-level ``tool_calls`` (an assistant's) and ``tool_call_id`` (a tool's) move
    under it; the tool call entries are copied (``_checked_calls``).
    """
    raw_meta = message.get("metadata")
    if raw_meta is not None and not isinstance(raw_meta, Mapping):
        raise InvalidMessageError(
            f"message metadata must be an object, got {type(raw_meta).__name__}"
        )
    meta: dict[str, Any] = dict(raw_meta or {})
    for key, value in message.items():
        if key not in _ROW_KEYS and key not in meta:
            meta[key] = value
    if role == "tool" and message.get("tool_call_id") is not None:
        meta["tool_call_id"] = message["tool_call_id"]
    if role != "assistant":
        return meta
    if message.get("tool_calls") is not None:
        meta["tool_calls"] = message["tool_calls"]
    if "tool_calls" in meta:
        calls = _checked_calls(meta.pop("tool_calls"))
        if calls is not None:
            meta["tool_calls"] = calls
    return meta


def _checked_calls(calls: object) -> list[dict[str, Any]] | None:
    """Return a copy of a row's tool call entries; raise when they are not a list of maps."""
    if calls is None:
        return None
    if not isinstance(calls, list):
        raise InvalidMessageError(f"tool_calls must be a list, got {type(calls).__name__}")
    copied: list[dict[str, Any]] = []
    for call in calls:
        if not isinstance(call, Mapping):
            raise InvalidMessageError(
                f"each tool call must be an object, got {type(call).__name__}"
            )
        copied.append(dict(call))
    return copied


def to_flat(message: Mapping[str, Any]) -> Message | None:
    """Coerce one entry to the flat shape a reasoner consumes (MEM-5 step 1).

    Returns None for an entry that must be dropped: not a map, or a missing or
    unknown role. Content is coerced with ``coerce_content``. An assistant keeps its
    tool call entries as given (both id spellings); a tool row keeps the id it
    answers. No metadata, no timestamp.
    """
    if not isinstance(message, Mapping):
        return None
    role = message.get("role")
    if not isinstance(role, str) or role not in ROLES:
        return None
    flat: Message = {"role": role, "content": coerce_content(message.get("content"))}
    if role == "assistant":
        calls = raw_tool_calls(message)
        if calls:
            flat["tool_calls"] = [dict(c) if isinstance(c, Mapping) else c for c in calls]
    elif role == "tool":
        rid = message.get("tool_call_id")
        if rid is None:
            rid = _metadata(message).get("tool_call_id")
        if rid is not None:
            flat["tool_call_id"] = rid
    return flat
