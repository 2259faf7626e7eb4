"""A message a save stores, serialized once: the dict its rows hold and the JSON kept beside them (decision 0145).

``rows.message_json`` is the plain way to the kept JSON (decision 0131): pydantic-ai's
JSON without its ``None`` fields when that reads back to the very same JSON, whole
otherwise; with ``rows.entry_rows``' own dump, it serializes a message with
``ModelMessagesTypeAdapter`` four times and validates it once. ``message_dumps`` gives
the same two results from one JSON-mode dump (``dump_python(mode="json")``, which the
rows need anyway): the JSON of that dump without its ``None`` values
(``pydantic_core.to_json``, no schema, no Python serializers), checked to read back to
the same dump. Where that check fails (a ``None`` inside a message's own data, such
as a tool call's arguments, which ``exclude_none`` keeps), it falls back to the plain
way's JSON, so the text kept is ``message_json``'s (tested on every part kind).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter
from pydantic_core import to_json

_ADAPTER = ModelMessagesTypeAdapter


def _without_none(value: Any) -> Any:
    """``value`` (JSON-mode data) without the ``None`` values of its objects, at every depth."""
    if type(value) is dict:
        return {key: _without_none(item) for key, item in value.items() if item is not None}
    if type(value) is list:
        return [_without_none(item) for item in value]
    return value


def _read_back(text: bytes, dumped: bytes) -> ModelMessage | None:
    """The message the JSON ``text`` validates to when its JSON-mode dump is ``dumped``, else None."""
    try:
        again = _ADAPTER.validate_json(b"[" + text + b"]")
    except ValidationError:
        return None
    return again[0] if to_json(_ADAPTER.dump_python(again, mode="json")[0]) == dumped else None


def message_dumps(message: ModelMessage) -> tuple[dict[str, Any], str, ModelMessage | None]:
    """The message's JSON-mode dump (for its rows), the JSON kept beside them as ``message_json`` gives it,
    and the message that JSON validates to when this checked it (None otherwise)."""
    dumped: dict[str, Any] = _ADAPTER.dump_python([message], mode="json")[0]
    full = to_json(dumped)
    lean = to_json(_without_none(dumped))
    if lean == full:
        return dumped, lean.decode(), None
    read = _read_back(lean, full)
    if read is not None:
        return dumped, lean.decode(), read
    exact = _ADAPTER.dump_json([message], exclude_none=True)[1:-1]  # keeps None inside a message's data
    read = None if exact == lean else _read_back(exact, full)
    return dumped, (full if read is None else exact).decode(), read


__all__ = ["message_dumps"]
