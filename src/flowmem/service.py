"""``MemoryService``: the one place that joins scope → store → core rules.

Every consumer — the FlowDrop nodes, the HTTP API, the runtime, the CLI and the
framework adapters — calls this object and none re-implements it. For each call it

1. validates the arguments with typed errors before anything touches storage
   (``key``, ``ttl``, ``max_messages``, ``last``, the messages via
   ``flowmem.core.prepare``, a record value's JSON form); text that cannot be
   stored (a lone surrogate) in any of them raises ``InvalidTextError``
   (``flowmem.core.check_storable``);
2. resolves the scope once through ``flowmem.scope.resolve_scope`` — the one place
   refusal is decided (MEM-6, MEM-13);
3. on a refusal returns the neutral result, logs exactly one WARNING on the
   ``flowmem`` logger naming the node, pipeline and workflow, and calls no store
   method at all (MEM-7, MEM-14);
4. otherwise calls the store at ``Address(scope, scope_id, key)``.

The ``*_raw`` methods are for trusted callers that already hold a scope id (the
FlowDrop "raw" nodes): they skip resolution, so they never refuse.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flowmem.core import Message, check_storable, is_empty, prepare, storable_text
from flowmem.errors import ConfigurationError, InvalidInputError, NotSerializableError
from flowmem.scope import ExecutionContext, Refusal, check_scope, resolve_scope
from flowmem.store.base import DEFAULT_LOCK_TIMEOUT, Address, Store

log = logging.getLogger("flowmem")

MAX_KEY_LENGTH = 255
# built once: json.dumps with any option set builds a new encoder on every call
_STRICT_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


@dataclass(frozen=True)
class ReadResult:
    """What a memory read reports: the value (or the default), whether it was found."""

    value: Any = None
    found: bool = False
    resolved_scope_id: str = ""
    refusal: Refusal | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """Return ``value``, ``found`` and ``resolved_scope_id`` as a plain dict."""
        return {
            "value": self.value,
            "found": self.found,
            "resolved_scope_id": self.resolved_scope_id,
        }


@dataclass(frozen=True)
class WriteResult:
    """What a write, delete or clear reports.

    ``success`` is False only on a refusal; ``removed`` is how many records (delete)
    or rows (clear) existed and were removed (0 for a write).
    """

    success: bool = False
    resolved_scope_id: str = ""
    removed: int = 0
    refusal: Refusal | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """Return ``success``, ``resolved_scope_id`` and ``removed`` as a plain dict."""
        return {
            "success": self.success,
            "resolved_scope_id": self.resolved_scope_id,
            "removed": self.removed,
        }


@dataclass(frozen=True)
class BufferResult:
    """What a buffer append or load reports (MEM-14).

    ``messages`` is the buffer after the call (empty when the caller asked not to
    have it returned), ``count`` its number of rows, ``appended`` how many incoming
    messages became new rows and ``appended_any`` whether that is more than zero.
    """

    messages: list[Message] = field(default_factory=list)
    count: int = 0
    appended: int = 0
    appended_any: bool = False
    resolved_scope_id: str = ""
    refusal: Refusal | None = field(default=None, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """Return the five reported fields as a plain dict."""
        return {
            "messages": self.messages,
            "count": self.count,
            "appended": self.appended,
            "appended_any": self.appended_any,
            "resolved_scope_id": self.resolved_scope_id,
        }


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


def check_json(value: object) -> None:
    """Raise unless ``value`` can be stored as strict JSON.

    ``NotSerializableError`` for what JSON cannot hold; ``InvalidTextError`` for text
    UTF-8 cannot encode (``flowmem.core.check_storable``).
    """
    try:
        text = _STRICT_JSON.encode(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise NotSerializableError(
            f"value is not JSON-serializable: {exc}", argument="value"
        ) from exc
    if not storable_text(text):
        check_storable(value, "value")  # raises InvalidTextError naming the field


def check_scope_id(scope_id: object) -> str:
    """Return an explicit scope id when it is storable text (``""`` included)."""
    if not isinstance(scope_id, str):
        raise InvalidInputError(
            f"scope_id must be a string, got {type(scope_id).__name__}", argument="scope_id"
        )
    check_storable(scope_id, "scope_id")
    return str(scope_id)


def _name(value: object) -> str:
    return "-" if value is None or value == "" else repr(value)


class MemoryService:
    """Memory records and conversation buffers under resolved scopes, over one ``Store``.

    ``lock_timeout`` bounds how long an append waits for its turn (MEM-12);
    ``clock`` returns epoch seconds and stamps rows and TTLs (inject one in tests).
    """

    def __init__(
        self,
        store: Store,
        *,
        lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if (
            isinstance(lock_timeout, bool)
            or not isinstance(lock_timeout, (int, float))
            or not math.isfinite(lock_timeout)
            or lock_timeout < 0
        ):
            raise ConfigurationError(f"lock_timeout must be a number >= 0, got {lock_timeout!r}")
        if not callable(clock):
            raise ConfigurationError("clock must be a callable returning epoch seconds")
        self.store = store
        self.lock_timeout = float(lock_timeout)
        self.clock = clock

    # --- resolution -------------------------------------------------------------
    def _resolve(
        self, operation: str, scope: object, key: str, context: ExecutionContext | None
    ) -> str | Refusal:
        """Resolve the scope once; on refusal log the one WARNING MEM-7 asks for.

        Implements MEM-7: the refusal is decided by ``resolve_scope`` alone and each
        refusal emits exactly one warning naming the node, pipeline and workflow.
        """
        resolved = resolve_scope(scope, context)
        if isinstance(resolved, Refusal):
            node = context.node_id if context is not None else None
            pipeline = context.pipeline_id if context is not None else None
            workflow = context.workflow_id if context is not None else None
            log.warning(
                "memory %s of key %r refused (scope %s, reason %s: %s) "
                "at node %s, pipeline %s, workflow %s; storage was not touched",
                operation,
                key,
                resolved.scope,
                resolved.reason,
                resolved.sentence,
                _name(node),
                _name(pipeline),
                _name(workflow),
                extra={
                    "flowmem_refusal": resolved.to_dict(),
                    "flowmem_operation": operation,
                    "flowmem_node": node,
                    "flowmem_pipeline": pipeline,
                    "flowmem_workflow": workflow,
                },
            )
        return resolved

    def _now(self) -> float:
        return float(self.clock())

    # --- memory records -----------------------------------------------------------
    def read(
        self, scope: str, key: str, context: ExecutionContext | None, default: Any = None
    ) -> ReadResult:
        """Read a memory record; a refusal returns ``default``, not found (MEM-7)."""
        name = check_key(key)
        resolved = self._resolve("read", scope, name, context)
        if isinstance(resolved, Refusal):
            return ReadResult(value=default, found=False, refusal=resolved)
        return self.read_raw(scope, resolved, name, default)

    def read_raw(self, scope: str, scope_id: str, key: str, default: Any = None) -> ReadResult:
        """Read a record at an explicit scope id (trusted callers; no resolution)."""
        address = Address(check_scope(scope), check_scope_id(scope_id), check_key(key))
        found, value = self.store.get_record(address, self._now())
        return ReadResult(
            value=value if found else default, found=found, resolved_scope_id=scope_id
        )

    def write(
        self,
        scope: str,
        key: str,
        value: Any,
        context: ExecutionContext | None,
        ttl: float | None = None,
    ) -> WriteResult:
        """Write a JSON value with an optional TTL in seconds; a refusal reports failure (MEM-7)."""
        name = check_key(key)
        check_ttl(ttl)
        check_json(value)
        resolved = self._resolve("write", scope, name, context)
        if isinstance(resolved, Refusal):
            return WriteResult(success=False, refusal=resolved)
        return self.write_raw(scope, resolved, name, value, ttl)

    def write_raw(
        self, scope: str, scope_id: str, key: str, value: Any, ttl: float | None = None
    ) -> WriteResult:
        """Write a record at an explicit scope id (trusted callers; no resolution)."""
        address = Address(check_scope(scope), check_scope_id(scope_id), check_key(key))
        seconds = check_ttl(ttl)
        check_json(value)
        expires_at = None if seconds is None else self._now() + seconds
        self.store.put_record(address, value, expires_at)
        return WriteResult(success=True, resolved_scope_id=scope_id)

    def delete(self, scope: str, key: str, context: ExecutionContext | None) -> WriteResult:
        """Delete a record; a refusal reports failure and deletes nothing (MEM-7)."""
        name = check_key(key)
        resolved = self._resolve("delete", scope, name, context)
        if isinstance(resolved, Refusal):
            return WriteResult(success=False, refusal=resolved)
        return self.delete_raw(scope, resolved, name)

    def delete_raw(self, scope: str, scope_id: str, key: str) -> WriteResult:
        """Delete a record at an explicit scope id; ``removed`` is 1 when one existed."""
        address = Address(check_scope(scope), check_scope_id(scope_id), check_key(key))
        existed = self.store.delete_record(address)
        return WriteResult(success=True, resolved_scope_id=scope_id, removed=int(existed))

    # --- conversation buffers -----------------------------------------------------
    def append(
        self,
        scope: str,
        key: str,
        messages: object,
        context: ExecutionContext | None,
        max_messages: int = 0,
        *,
        return_messages: bool = True,
    ) -> BufferResult:
        """Append messages to a buffer under the core rules (MEM-1, 2, 3, 10, 14).

        Implements MEM-14's refused clause: a refusal returns an empty buffer with a
        count of zero and ``appended`` 0, and the turn is dropped, never written to a
        shared history (MEM-7). ``return_messages=False`` skips loading the buffer
        after the append (``messages`` is then ``[]``; ``count`` is still exact) —
        for hot paths and benchmarks.
        """
        name = check_key(key)
        window = check_count(max_messages, "max_messages")
        rows = prepare(messages, int(self._now()))
        resolved = self._resolve("append", scope, name, context)
        if isinstance(resolved, Refusal):
            return BufferResult(refusal=resolved)
        return self._append_rows(
            Address(check_scope(scope), resolved, name), rows, window or 0, return_messages
        )

    def append_raw(
        self,
        scope: str,
        scope_id: str,
        key: str,
        messages: object,
        max_messages: int = 0,
        *,
        return_messages: bool = True,
    ) -> BufferResult:
        """Append to a buffer at an explicit scope id (trusted callers; no resolution)."""
        address = Address(check_scope(scope), check_scope_id(scope_id), check_key(key))
        window = check_count(max_messages, "max_messages")
        rows = prepare(messages, int(self._now()))
        return self._append_rows(address, rows, window or 0, return_messages)

    def _append_rows(
        self, address: Address, rows: list[Message], window: int, return_messages: bool
    ) -> BufferResult:
        if all(is_empty(row) for row in rows):
            # nothing to append (e.g. a user turn with no content): a pure read, no write
            if return_messages:
                return self.load_raw(address.scope, address.scope_id, address.key)
            return BufferResult(count=self.store.count(address), resolved_scope_id=address.scope_id)
        outcome = self.store.append(
            address, rows, window, self.lock_timeout, snapshot=return_messages
        )
        return BufferResult(
            messages=outcome.rows or [],
            count=outcome.count,
            appended=outcome.appended,
            appended_any=outcome.appended > 0,
            resolved_scope_id=address.scope_id,
        )

    def load(
        self, scope: str, key: str, context: ExecutionContext | None, last: int | None = None
    ) -> BufferResult:
        """Return the buffer (its last ``last`` rows when given) without appending.

        ``count`` is the whole buffer's row count. A refusal returns the empty
        neutral buffer (MEM-7).
        """
        name = check_key(key)
        check_count(last, "last", optional=True)
        resolved = self._resolve("load", scope, name, context)
        if isinstance(resolved, Refusal):
            return BufferResult(refusal=resolved)
        return self.load_raw(scope, resolved, name, last)

    def load_raw(
        self, scope: str, scope_id: str, key: str, last: int | None = None
    ) -> BufferResult:
        """Load a buffer at an explicit scope id (trusted callers; no resolution)."""
        address = Address(check_scope(scope), check_scope_id(scope_id), check_key(key))
        tail = check_count(last, "last", optional=True)
        rows = self.store.load(address, tail)
        count = len(rows) if tail is None else self.store.count(address)
        return BufferResult(messages=rows, count=count, resolved_scope_id=scope_id)

    def clear(self, scope: str, key: str, context: ExecutionContext | None) -> WriteResult:
        """Delete every row of a buffer; a refusal reports failure and clears nothing (MEM-7)."""
        name = check_key(key)
        resolved = self._resolve("clear", scope, name, context)
        if isinstance(resolved, Refusal):
            return WriteResult(success=False, refusal=resolved)
        return self.clear_raw(scope, resolved, name)

    def clear_raw(self, scope: str, scope_id: str, key: str) -> WriteResult:
        """Clear a buffer at an explicit scope id; ``removed`` is the number of rows deleted."""
        address = Address(check_scope(scope), check_scope_id(scope_id), check_key(key))
        removed = self.store.clear(address)
        return WriteResult(success=True, resolved_scope_id=scope_id, removed=removed)
