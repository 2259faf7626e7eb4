"""The memory service's argument checks: keys, TTLs, counts, sizes, scope ids, window arguments.

Each raises a typed error (``InvalidInputError``, ``MessageTooLargeError``,
``RecordTooLargeError``, ``NotSerializableError``) before anything touches storage;
``MemoryService`` and the adapters that write beside it call them.
"""

from __future__ import annotations

import math

from flowmem.core import Message, check_storable
from flowmem.errors import (
    FlowmemError,
    InvalidInputError,
    MessageTooLargeError,
    NotSerializableError,
    RecordTooLargeError,
)
from flowmem.limits import raise_hint
from flowmem.scope import NAME_MAX
from flowmem.store.rows import dump_json, utf8_size

MAX_KEY_LENGTH = NAME_MAX
_MESSAGE_HINT = raise_hint("message_bytes")  # how a refusal says to raise the limit
_RECORD_HINT = raise_hint("record_bytes")


def check_key(key: object) -> str:
    """Return ``key`` when it is storable text of 1 to 255 code points; else raise."""
    if not isinstance(key, str):
        raise InvalidInputError(f"key must be a string, got {type(key).__name__}", argument="key")
    if not 1 <= len(key) <= MAX_KEY_LENGTH:
        raise InvalidInputError(
            f"key must be 1 to {MAX_KEY_LENGTH} characters long, got {len(key)}",
            argument="key",
        )
    check_storable(key, "key")
    return str(key)


def check_ttl(ttl: object) -> float | None:
    """Return ``ttl`` (seconds) when it is None or a positive finite number; else raise."""
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        raise InvalidInputError(
            f"ttl must be a positive number of seconds or null, got {type(ttl).__name__}",
            argument="ttl",
        )
    if not math.isfinite(ttl) or ttl <= 0:
        raise InvalidInputError(
            f"ttl must be a positive number of seconds, got {ttl!r}", argument="ttl"
        )
    return float(ttl)


def check_count(value: object, name: str, *, optional: bool = False) -> int | None:
    """Return ``value`` when it is an integer >= 0 (or None when ``optional``); else raise."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidInputError(f"{name} must be an integer >= 0, got {value!r}", argument=name)
    return int(value)


def check_size(
    text: str,
    limit: int,
    error: type[FlowmemError],
    what: str,
    hint: str = "",
    **details: object,
) -> None:
    """Raise ``error`` when the JSON ``text`` of ``what`` is over ``limit`` UTF-8 bytes (0: no limit).

    ``hint`` (how to raise the limit) ends the error's message.
    """
    if not limit:
        return
    size = utf8_size(text)
    if size > limit:
        raise error(
            f"{what} is {size} bytes as JSON, over the limit of {limit} bytes"
            + (f": {hint}" if hint else ""),
            limit=limit,
            size=size,
            **details,
        )


def check_record(value: object, limit: int) -> None:
    """Refuse a record value that is not JSON, or whose stored JSON passes ``limit`` bytes."""
    try:
        text = dump_json(value, "value", compact=False)  # exactly what the stores write
    except NotSerializableError as exc:
        raise NotSerializableError(exc.message, argument="value") from exc
    check_size(text, limit, RecordTooLargeError, "the value", _RECORD_HINT, argument="value")


def check_message_sizes(rows: list[Message], limit: int) -> None:
    """Refuse (MessageTooLargeError) a prepared row whose stored JSON passes ``limit`` bytes."""
    if not limit:
        return
    for index, row in enumerate(rows):
        text = dump_json(row, "message")
        what = f"message {index}"
        check_size(text, limit, MessageTooLargeError, what, _MESSAGE_HINT, argument="messages")


def check_scope_id(scope_id: object) -> str:
    """Return an explicit scope id when it is storable text (``""`` included)."""
    if not isinstance(scope_id, str):
        raise InvalidInputError(
            f"scope_id must be a string, got {type(scope_id).__name__}", argument="scope_id"
        )
    check_storable(scope_id, "scope_id")
    return str(scope_id)


def window_args(
    last: int | None, max_tokens: object, counter: object, first_role: object
) -> int | None:
    """The token budget of a load (None: none asked); InvalidInputError for bad window arguments."""
    if max_tokens is None:
        if counter is not None or first_role is not None:
            raise InvalidInputError("counter and first_role need max_tokens")
        return None
    budget = check_count(max_tokens, "max_tokens")
    if last is not None:
        raise InvalidInputError("give last or max_tokens, not both")
    if counter is not None and not callable(counter):
        raise InvalidInputError("counter must be a callable taking one stored row")
    if first_role is not None and first_role not in ("user", "assistant"):
        raise InvalidInputError(f"first_role must be user or assistant, got {first_role!r}")
    return budget


__all__ = [
    "MAX_KEY_LENGTH",
    "check_count",
    "check_key",
    "check_message_sizes",
    "check_record",
    "check_scope_id",
    "check_size",
    "check_ttl",
    "window_args",
]
