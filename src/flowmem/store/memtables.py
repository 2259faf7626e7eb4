"""The parts of ``MemoryStore`` that only read its buffers or keep a table of their own.

Mixins of ``flowmem.store.memory.MemoryStore``, which holds the state (and its one
lock) they declare: its buffer reads (``BufferReads``), its idempotency keys
(``IdempotencyKeys``) and its tokens (``Tokens``). Each method takes the store's lock,
as the store's own do.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from dataclasses import replace

from flowmem.core import Message
from flowmem.store.base import (
    Address,
    BodyPage,
    Idempotency,
    StoredAnswer,
    TokenRecord,
)
from flowmem.store.paging import PageAsk, PagedReads, check_version
from flowmem.store.rows import check_address, check_batch, check_last, check_texts, dump_json


class BufferReads(PagedReads):
    """``MemoryStore``'s reads of its buffers: copies, pages and JSON texts of the rows."""

    _lock: threading.RLock
    _buffers: dict[Address, list[Message]]
    _versions: dict[Address, int]

    def load(self, address: Address, last: int | None = None) -> list[Message]:
        """Return a copy of the buffer's rows (the last ``last`` when given)."""
        check_address(address)
        check_last(last)
        with self._lock:
            rows = self._buffers.get(address, [])
            picked = rows[-last:] if last else ([] if last == 0 else rows)
            return copy.deepcopy(picked)

    def iter_rows(self, address: Address, batch: int = 1000) -> Iterator[Message]:
        """Yield copies of the buffer's rows in order, ``batch`` copied at a time (one snapshot)."""
        check_address(address)
        check_batch(batch)
        with self._lock:
            # stored rows are never changed in place (an append edits copies), so a
            # shallow copy of the list is a snapshot
            rows = list(self._buffers.get(address, []))
        return self._iter_rows(rows, batch)

    @staticmethod
    def _iter_rows(rows: list[Message], batch: int) -> Iterator[Message]:
        for start in range(0, len(rows), batch):
            yield from copy.deepcopy(rows[start : start + batch])

    def load_bodies(
        self, address: Address, last: int | None = None, before: int | None = None
    ) -> list[tuple[int, str]]:
        """Return ``(index, compact JSON)`` of the rows in order (below ``before``, the last ``last``)."""
        check_address(address)
        check_last(last)
        check_last(before)
        with self._lock:
            rows = self._buffers.get(address, [])
            end = len(rows) if before is None else min(before, len(rows))
            start = 0 if last is None else max(end - last, 0)
            return [(index, dump_json(rows[index], "message")) for index in range(start, end)]

    def _page(self, address: Address, ask: PageAsk) -> BodyPage:
        """One page of a paged read (``Store.page_bodies``); cursors are row indexes."""
        after, before, last, rows, chars = ask.after, ask.before, ask.last, ask.rows, ask.chars
        with self._lock:
            stored = self._buffers.get(address)
            found = None if stored is None else (0, self._versions.get(address, 0))
            check_version(address, found, ask.version)
            if stored is None or found is None:
                return BodyPage(None, 0)
            end = len(stored) if before is None else min(before, len(stored))
            start = 0 if after is None else after + 1
            older = False
            if last == 0:
                return BodyPage(found, len(stored))
            if last is not None:
                floor = max(end - last, 0)
                older = floor > 0
                start = max(start, floor)
            bodies: list[tuple[int, str]] = []
            size = 0
            index = start
            while index < end and len(bodies) < rows and size < chars:
                text = dump_json(stored[index], "message")
                bodies.append((index, text))
                size += len(text)
                index += 1
            return BodyPage(found, len(stored), bodies, older, index < end)


class IdempotencyKeys:
    """``MemoryStore``'s idempotency keys, a dict by (owner, key) (docs/decisions/0031)."""

    _lock: threading.RLock
    _keys: dict[tuple[str, str], StoredAnswer]

    def get_idempotency(self, owner: str, key: str, now: float) -> StoredAnswer | None:
        """Return the owner's live key; None when absent or expired (an expired one is deleted)."""
        with self._lock:
            stored = self._keys.get((owner, key))
            if stored is not None and stored.expires_at is not None and stored.expires_at <= now:
                del self._keys[(owner, key)]
                return None
            return stored

    def claim_idempotency(self, idempotency: Idempotency, now: float) -> StoredAnswer | None:
        """Record the key as claimed (status 0); None when it was free, else the live key."""
        with self._lock:
            found = self.get_idempotency(idempotency.owner, idempotency.key, now)
            if found is not None:
                return found
            self._keys[(idempotency.owner, idempotency.key)] = StoredAnswer(
                idempotency.fingerprint, 0, "", idempotency.expires_at
            )
            return None

    def answer_idempotency(self, owner: str, key: str, status: int, body: str) -> None:
        """Record the answer of a claimed key (no change when it is no longer claimed)."""
        with self._lock:
            stored = self._keys.get((owner, key))
            if stored is not None and stored.status == 0:
                self._keys[(owner, key)] = replace(stored, status=status, body=body)

    def release_idempotency(self, owner: str, key: str) -> None:
        """Delete a claimed key whose request failed (an answered key is kept)."""
        with self._lock:
            stored = self._keys.get((owner, key))
            if stored is not None and stored.status == 0:
                del self._keys[(owner, key)]


class Tokens:
    """``MemoryStore``'s API tokens, a dict by id."""

    _lock: threading.RLock
    _tokens: dict[str, TokenRecord]

    def create_token(self, token: TokenRecord) -> None:
        """Store a token record."""
        check_texts(id=token.id, user_id=token.user_id, label=token.label)
        with self._lock:
            self._tokens[token.id] = token

    def token_by_hash(self, token_hash: str) -> TokenRecord | None:
        """Return the token with this hash."""
        with self._lock:
            return next((t for t in self._tokens.values() if t.token_hash == token_hash), None)

    def list_tokens(self) -> list[TokenRecord]:
        """Return every token record, oldest first."""
        with self._lock:
            return sorted(self._tokens.values(), key=lambda t: t.created_at)

    def revoke_token(self, token_id: str) -> bool:
        """Mark a token revoked."""
        with self._lock:
            token = self._tokens.get(token_id)
            if token is None:
                return False
            self._tokens[token_id] = replace(token, revoked=True)
            return True


__all__ = ["BufferReads", "IdempotencyKeys", "Tokens"]
