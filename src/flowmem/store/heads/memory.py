"""``SessionBuffers`` over a ``MemoryStore``'s engine tables: the reference the SQL backends are tested against.

A buffer's creation order is its place in the store's buffer dict (a dict keeps
insertion order; a deleted buffer made again goes to the end).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from flowmem.store.base import SESSION_SCOPE
from flowmem.store.checkpoints import ROWS_TYPE
from flowmem.store.conversations.lines import locate
from flowmem.store.conversations.memory import MemoryLineTx
from flowmem.store.heads.facts import (
    BufferCount,
    check_sessions,
    first_line,
    head_id,
    is_framework_line,
)

if TYPE_CHECKING:
    from flowmem.store.memory import MemoryStore


class MemoryBuffers:
    """Reads one ``MemoryStore``'s buffers, checkpoints and conversations."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def _of(self, session_ids: Sequence[str]) -> dict[str, list[BufferCount]]:
        wanted = set(check_sessions(session_ids))
        found: dict[str, list[BufferCount]] = {}
        with self.store.locked() as tables:
            for born, (address, rows) in enumerate(tables.buffers.items()):
                if address.scope == SESSION_SCOPE and address.scope_id in wanted:
                    found.setdefault(address.scope_id, []).append(
                        BufferCount(address.key, len(rows), born)
                    )
        return found

    def buffers(self, session_id: str, limit: int) -> list[BufferCount]:
        """Every buffer of the session in key order, at most ``limit``."""
        return sorted(self._of([session_id]).get(session_id, []), key=lambda b: b.key)[:limit]

    def counts(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], BufferCount]:
        """The buffers named by ``(session id, key)`` that exist."""
        found = self._of([sid for sid, _ in pairs])
        wanted = set(pairs)
        return {
            (sid, b.key): b for sid, listed in found.items() for b in listed if (sid, b.key) in wanted
        }

    def newest(self, session_ids: Sequence[str]) -> dict[str, BufferCount]:
        """Per session, among buffers that are no framework line: non-empty first, then created last."""
        found = {}
        for sid, listed in self._of(session_ids).items():
            kept = [b for b in listed if not is_framework_line(b.key)]
            if kept:
                found[sid] = min(kept, key=lambda b: (b.count == 0, -b.born))
        return found

    def graph_lines(self, session_ids: Sequence[str]) -> dict[str, dict[str, str]]:
        """Per thread, first-line key -> line key of its latest root-namespace checkpoint."""
        checkpoints = self.store.checkpoints
        found: dict[str, dict[str, str]] = {}
        for sid in check_sessions(session_ids):
            latest = checkpoints.get_checkpoint(sid, "", None)
            if latest is None:
                continue
            versions = {channel: str(v) for channel, v in latest.versions.items()}
            for blob in checkpoints.get_blobs(sid, "", versions):
                kind, value = blob.value
                if kind == ROWS_TYPE:
                    key = str(json.loads(value)["key"])
                    found.setdefault(sid, {})[first_line(key)] = key
        return found

    def conversation_lines(self, session_ids: Sequence[str]) -> dict[str, str]:
        """Per conversation, the line its head entry ends."""
        conversations = self.store.conversations
        found = {}
        for sid in check_sessions(session_ids):
            stored = conversations.get(sid)
            head = None if stored is None else head_id(stored.record)
            if head is None:
                continue
            with self.store.locked() as tables:
                place = locate(MemoryLineTx(conversations, tables, sid), head, sid)
            if place is not None:
                found[sid] = place.key
        return found


__all__ = ["MemoryBuffers"]
