"""The memory service's argument checks: keys, TTLs, counts, sizes, scope ids, window arguments.

Each raises a typed error (``InvalidInputError``, ``MessageTooLargeError``,
``RecordTooLargeError``, ``NotSerializableError``) before anything touches storage;
``MemoryService`` and the adapters that write beside it call them.
"""

from __future__ import annotations

import math

from flowmem.core import Message, check_storable
from flowmem.core.append import incoming_list
from flowmem.core.messages import to_row
from flowmem.errors import (
    ConfigurationError,
    FlowmemError,
    InvalidInputError,
    MessageTooLargeError,
    NotSerializableError,
    RecordTooLargeError,
    ScopeRefusedError,
)
from flowmem.limits import raise_hint
from flowmem.scope import NAME_MAX, ExecutionContext, check_scope, usable_identity
from flowmem.store.base import Address
from flowmem.store.rows import DumpedRow, dump_json, dumped_rows, utf8_size

MAX_KEY_LENGTH = NAME_MAX
_MESSAGE_HINT = raise_hint("message_bytes")  # how a refusal says to raise the limit
_RECORD_HINT = raise_hint("record_bytes")


def check_name(
    value: object, name: str, *, empty: bool = False, longest: int | None = NAME_MAX
) -> str:
    """Return ``value`` when it is text the HTTP API takes as an id or a name; else raise.

    The one bound of every id and name flowmem is handed (a key, a session or user id,
    a checkpoint id, an ADK app name …), in process as over HTTP: a string of 1 (0 when
    ``empty``) to ``longest`` code points (``NAME_MAX``, 255; None: no bound), without
    NUL (no store keeps one), that UTF-8 can encode. ``InvalidInputError`` (not a
    string, too long, NUL) or ``InvalidTextError`` (a lone surrogate), each naming
    ``name``, before anything reaches a store or a driver.
    """
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, got {type(value).__name__}", argument=name)
    too_long = longest is not None and len(value) > longest
    if too_long or (not value and not empty):
        if longest is None:
            span = "at least 1"
        else:
            span = f"at most {longest}" if empty else f"1 to {longest}"
        raise InvalidInputError(
            f"{name} must be {span} characters long, got {len(value)}", argument=name
        )
    if "\x00" in value:
        raise InvalidInputError(
            f"{name} must not contain NUL characters (no store keeps one), got {value[:40]!r}",
            argument=name,
        )
    if not value.isascii():
        check_storable(value, name)
    return str(value)


def check_id_text(value: object, name: str) -> object:
    """Return an identity (a session, thread, conversation or user id) whose text the API would take.

    Text goes through ``check_name`` (``""`` included: it is *no* id, which the scope
    rules refuse, MEM-13); anything else (an int, None) is returned for the identity
    rules (``flowmem.scope.usable_identity``) to judge. So text that cannot be an id
    at all is a typed error, where a well-formed id that is not usable (``"None"``,
    ``" "``, ``"0"``) is still refused as MEM-6, MEM-9 and MEM-13 say.
    """
    if isinstance(value, str):
        check_name(value, name, empty=True)
    return value


CONTEXT_IDS = ("session_id", "user_id", "workflow_id", "pipeline_id", "execution_id")
"""The ids of an ``ExecutionContext`` an adapter is built with, checked by ``check_context_ids``."""


def check_context_ids(context: object) -> None:
    """Refuse an execution context holding an id the HTTP API would refuse (``check_id_text``).

    For the adapters built with a context: a session, user, workflow, pipeline or
    execution id over 255 code points, holding NUL or a lone surrogate raises at
    construction, as a request naming it would be refused, instead of being refused
    (or stored) later. None passes.
    """
    for field in CONTEXT_IDS:
        check_id_text(getattr(context, field, None), field)


def context_user(context: object, adapter: str) -> str | None:
    """The user an adapter built with ``context`` acts as (decision 0109), or None (built for no user).

    Checks the context (an ``ExecutionContext`` or None, ids as ``check_context_ids``);
    a ``user_id`` named but not usable raises ``ScopeRefusedError`` (MEM-6), never a
    service that acts for every user.
    """
    if context is None:
        return None
    if not isinstance(context, ExecutionContext):
        raise ConfigurationError(f"{adapter} context must be an ExecutionContext, got {context!r}")
    check_context_ids(context)
    if context.user_id is None:
        return None
    user = usable_identity(context.user_id)
    if user is None:
        raise ScopeRefusedError(
            f"{adapter} refused its context: user id {context.user_id!r} is not usable (1-255 "
            "characters, no whitespace, not a placeholder); give a user id, or no context for "
            "an operator's",
            rule="MEM-6",
            argument="user_id",
        )
    return user


def check_key(key: object) -> str:
    """Return ``key`` when it is storable text of 1 to 255 code points without NUL; else raise."""
    return check_name(key, "key")


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
        text = row.text if type(row) is DumpedRow else dump_json(row, "message")
        what = f"message {index}"
        check_size(text, limit, MessageTooLargeError, what, _MESSAGE_HINT, argument="messages")


def prepared(messages: object, now: int) -> list[Message]:
    """``prepare(messages, now)``'s rows, each serialized once with its text (``DumpedRow``).

    The same rows and the same errors as ``prepare`` (decision 0161): the text proves a
    row storable instead of a second walk, and ``check_message_sizes`` and the stores
    use it instead of serializing the row again.
    """
    return dumped_rows([to_row(message, now) for message in incoming_list(messages)])


def check_scope_id(scope_id: object) -> str:
    """Return an explicit scope id when it is storable text (``""`` included)."""
    if not isinstance(scope_id, str):
        raise InvalidInputError(
            f"scope_id must be a string, got {type(scope_id).__name__}", argument="scope_id"
        )
    check_storable(scope_id, "scope_id")
    return str(scope_id)


def checked_address(scope: object, scope_id: object, key: object) -> Address:
    """The address of a record or buffer at an explicit scope id, each part checked (scope, scope id, key)."""
    return Address(check_scope(scope), check_scope_id(scope_id), check_key(key))


def check_prefixed(scope: object, scope_id: object, prefix: object) -> tuple[str, str, str]:
    """The checked (scope, scope id, key prefix) of a listing or a vector search: the prefix may be empty."""
    return check_scope(scope), check_scope_id(scope_id), check_name(prefix, "prefix", empty=True, longest=None)


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
    "CONTEXT_IDS",
    "MAX_KEY_LENGTH",
    "check_context_ids",
    "check_count",
    "check_id_text",
    "check_key",
    "check_message_sizes",
    "check_name",
    "check_record",
    "check_scope_id",
    "check_size",
    "check_ttl",
    "prepared",
    "window_args",
]
