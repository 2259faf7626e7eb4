"""A write tool's ``request_id``: a retried call is answered once, and stores nothing twice.

A client that retries a call it did not see answered (a timeout, a dropped
connection) sends the same ``request_id``: the write records it in its own
transaction with its answer (``flowmem.store.base.Idempotency``, docs/decisions/0031),
so a repeat returns the first answer with ``replayed: true`` and writes nothing. The
key is the user's (``user:<id>``, erased with the user), named ``mcp:<request_id>``
so it never meets an HTTP ``Idempotency-Key``; a different call under a used
``request_id`` is refused (``idempotency_key_reused``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

from flowmem.errors import (
    FlowmemError,
    IdempotencyKeyInFlightError,
    IdempotencyKeyInvalidError,
    IdempotencyKeyReusedError,
)
from flowmem.service import MemoryService
from flowmem.store.base import Idempotency, StoredAnswer, idempotency_owner

REQUEST_ID = re.compile(r"[\x21-\x7e]{1,200}")
"""A request id: 1–200 visible ASCII characters."""


def check_request_id(value: object) -> str | None:
    """``value`` when it is a usable request id (None: no key); IdempotencyKeyInvalidError otherwise."""
    if value is None:
        return None
    if not isinstance(value, str) or REQUEST_ID.fullmatch(value) is None:
        raise IdempotencyKeyInvalidError(
            f"request_id must be 1-200 visible ASCII characters (a UUID is fine), got {value!r}",
            argument="request_id",
        )
    return value


def fingerprint(tool: str, arguments: dict[str, Any]) -> str:
    """The hash of a call: its tool and arguments (key order and spacing do not count)."""
    text = json.dumps([tool, arguments], sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _repeat(stored: StoredAnswer, mark: str) -> dict[str, Any]:
    if stored.fingerprint != mark:
        raise IdempotencyKeyReusedError("this request_id was used for a different call")
    if stored.status == 0:
        raise IdempotencyKeyInFlightError("the first call with this request_id is not answered yet")
    answer: dict[str, Any] = json.loads(stored.body)
    return {**answer, "replayed": True}


def once(
    memory: MemoryService,
    user: str,
    request_id: str | None,
    mark: str,
    write: Callable[[Idempotency | None], dict[str, Any]],
) -> dict[str, Any]:
    """Run ``write(idempotency)`` (its store write records the key), or repeat the first answer.

    Without a request id, ``write(None)``. ``write`` returns the JSON answer; it is
    what a repeat gets back, with ``replayed: true``.
    """
    if request_id is None:
        return write(None)
    owner = idempotency_owner(user, None)
    key = f"mcp:{request_id}"
    retention = memory.limits.idempotency_seconds
    now = float(memory.clock())
    stored = memory.store.get_idempotency(owner, key, now)
    if stored is not None:
        return _repeat(stored, mark)
    idem = Idempotency(
        owner=owner,
        key=key,
        fingerprint=mark,
        expires_at=now + retention if retention else None,
        answer=lambda answer: (200, json.dumps(answer, ensure_ascii=False)),
    )
    try:
        return write(idem)
    except FlowmemError:
        # a concurrent retry recorded the key first (IdempotencyKeyInFlightError from the
        # store, or the error of a write whose ground the first one changed): its answer
        stored = memory.store.get_idempotency(owner, key, float(memory.clock()))
        if stored is None:
            raise
        return _repeat(stored, mark)
