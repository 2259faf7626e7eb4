"""Text-to-message and message assembly nodes' pure rules (MEM-16, MEM-4)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from flowmem.core.messages import ROLES, Message, coerce_content


class TextMessage(NamedTuple):
    """The same message as a one-element list and as an object (both empty for no content)."""

    messages: list[Message]
    message: Message


def text_to_message(text: object, role: object = None, tool_call_id: object = None) -> TextMessage:
    """Turn a text value and a role into one flat message.

    Implements MEM-16: content is coerced as normalization coerces it; a role that
    is not ``user``/``assistant``/``system``/``tool`` (absent included) becomes
    ``user``; a tool call id is kept only on role ``tool``, trimmed, and omitted
    when blank; empty content gives ``[]`` and ``{}``.
    """
    content = coerce_content(text)
    if content == "":
        return TextMessage([], {})
    resolved = role if isinstance(role, str) and role in ROLES else "user"
    row: Message = {"role": resolved, "content": content}
    usable_type = isinstance(tool_call_id, (str, int)) and not isinstance(tool_call_id, bool)
    if resolved == "tool" and usable_type:
        trimmed = str(tool_call_id).strip()
        if trimmed:
            row["tool_call_id"] = trimmed
    return TextMessage([row], dict(row))


def assemble(*inputs: object) -> list[Any]:
    """Flatten message inputs in declared order into one list.

    Implements MEM-4: a list contributes its map items in order (a non-map item is
    skipped), one map contributes itself, and ``None`` or any other value
    contributes nothing. Rows pass through unchanged.
    """
    out: list[Any] = []
    for value in inputs:
        if isinstance(value, Mapping):
            out.append(value)
        elif isinstance(value, (list, tuple)):
            out.extend(item for item in value if isinstance(item, Mapping))
    return out
