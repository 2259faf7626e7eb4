"""``MemoryVectors``: the vectors of a ``MemoryStore``'s records, beside them, under its lock.

The store calls ``drop`` from its record steps (a record deleted, or given another
value) and uncounts the bytes it returns with the record's; ``put`` writes the record
through the store and its vectors in one locked step, counted against the record's
owner's quota first (a refused put changes nothing).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from flowmem.errors import ConflictError, InvalidInputError
from flowmem.store.base import Address, quota_owner
from flowmem.store.engine import MemoryEngine
from flowmem.store.rows import check_address
from flowmem.store.vectors import (
    ACTIVE,
    NEXT,
    Pending,
    ScanRow,
    Search,
    Space,
    Spaces,
    SupportsVectors,
    Vector,
    check_space,
    check_vectors,
    mismatch,
)

_Slot = tuple[int, str, int]  # (space id, field, ordinal)


class _Records(Protocol):
    def put_record(self, address: Address, value: Any, expires_at: float | None) -> None: ...


class MemoryVectors(SupportsVectors):
    """Per record address, its vectors by (space id, field, ordinal); per collection, its spaces."""

    def __init__(self, store: MemoryEngine, records: _Records) -> None:
        self.store = store
        self.records = records
        self._vectors: dict[Address, dict[_Slot, bytes]] = {}
        self._spaces: dict[str, dict[str, tuple[int, Space]]] = {}
        self._ids = 0

    # --- the store's record steps (its lock held) ----------------------------------------
    def held(self, address: Address) -> int:
        """The bytes of a record's vectors."""
        return sum(len(data) for data in self._vectors.get(address, {}).values())

    def drop(self, address: Address) -> int:
        """Forget a record's vectors (deleted, or given another value); return their bytes."""
        return sum(len(data) for data in self._vectors.pop(address, {}).values())

    # --- SupportsVectors -------------------------------------------------------------------
    def spaces(self, collection: str) -> Spaces:
        """The collection's active and next spaces."""
        with self.store.locked():
            found = self._spaces.get(collection, {})
            active, following = found.get(ACTIVE), found.get(NEXT)
        return Spaces(active and active[1], following and following[1])

    def _add_space(self, collection: str, state: str, space: Space) -> int:
        self._ids += 1
        self._spaces.setdefault(collection, {})[state] = (self._ids, space)
        return self._ids

    def put(
        self,
        address: Address,
        text: str,
        expires_at: float | None,
        collection: str,
        space: Space,
        vectors: Sequence[Vector],
    ) -> None:
        """Write the record ``text`` and replace its vectors in one locked step (EmbeddingSpaceError first)."""
        check_address(address)
        check_space(space)
        checked = check_vectors(vectors, space)
        with self.store.locked() as tables:
            active = self._spaces.get(collection, {}).get(ACTIVE)
            if checked and active is not None and active[1] != space:
                raise mismatch(collection, active[1], space, "put")
            owner = quota_owner(address.scope, address.scope_id, None)
            size = sum(len(vector.data) for vector in checked)
            stored = tables.records.get(address)
            # the record's step drops the vectors of a record given another value; these stay
            same = stored is not None and stored[0] == text
            kept = sum(len(data) for data in self._vectors.get(address, {}).values()) if same else 0
            self.store.charge(tables, owner, size - kept, 0, 0)  # QuotaExceededError: nothing changed
            try:
                self.records.put_record(address, json.loads(text), expires_at)
            except BaseException:
                self.store.charge(tables, owner, kept - size, 0, 0)
                raise
            self._vectors.pop(address, None)
            if checked:
                sid = active[0] if active is not None else self._add_space(collection, ACTIVE, space)
                self._vectors[address] = {(sid, v.field, v.ord): v.data for v in checked}

    def _scan(self, search: Search, lower: str, values: bool, limit_bytes: int) -> tuple[list[ScanRow], bool]:
        """The live active-space vectors from key ``lower``, in one page (the store is in memory)."""
        scope, scope_id, prefix, now, collection, space = search
        with self.store.locked() as tables:
            active = self._spaces.get(collection, {}).get(ACTIVE)
            if active is None:
                return [], False
            if active[1] != space:
                raise mismatch(collection, active[1], space, "search")
            found: list[tuple[str, str, int, str, bytes]] = []
            for address, slots in self._vectors.items():
                if address.scope != scope or address.scope_id != scope_id:
                    continue
                if address.key < lower or not address.key.startswith(prefix):
                    continue
                text, expires_at = tables.records[address]
                if expires_at is not None and expires_at <= now:
                    continue
                for (sid, field, ord_), data in slots.items():
                    if sid == active[0]:
                        found.append((address.key, field, ord_, text, data))
        found.sort(key=lambda row: row[:3])
        return [ScanRow(key, text if values else None, data) for key, _, _, text, data in found], False

    def begin(self, collection: str, space: Space) -> Spaces:
        """Record ``space`` as the collection's next space (kept when it already is; replaced otherwise)."""
        check_space(space)
        with self.store.locked():
            found = self._spaces.get(collection, {})
            active, following = found.get(ACTIVE), found.get(NEXT)
            if active is None:
                raise InvalidInputError(
                    f"the {collection!r} collection has no vectors yet: nothing to re-embed"
                )
            if active[1] == space:
                raise InvalidInputError(f"the {collection!r} vectors are in {space} already")
            if following is None or following[1] != space:
                if following is not None:
                    self._drop_space(following[0])
                self._add_space(collection, NEXT, space)
        return self.spaces(collection)

    def _drop_space(self, sid: int) -> None:
        """Delete every vector of a space (the lock held), uncounted from their owners."""
        with self.store.locked() as tables:
            for address, slots in self._vectors.items():
                gone = [slot for slot in slots if slot[0] == sid]
                size = sum(len(slots.pop(slot)) for slot in gone)
                if size:
                    self.store.charge(tables, quota_owner(address.scope, address.scope_id, None), -size, 0, 0)

    def _waiting(self, collection: str) -> list[Address]:
        found = self._spaces.get(collection, {})
        active, following = found.get(ACTIVE), found.get(NEXT)
        if active is None or following is None:
            return []
        return sorted(
            address
            for address, slots in self._vectors.items()
            if any(slot[0] == active[0] for slot in slots)
            and not any(slot[0] == following[0] for slot in slots)
        )

    def pending(self, collection: str, after: Address | None, limit: int) -> list[Pending]:
        """Records after ``after`` with active vectors and none in the next space, in address order."""
        with self.store.locked() as tables:
            active = self._spaces.get(collection, {}).get(ACTIVE)
            waiting = [a for a in self._waiting(collection) if after is None or a > after][:limit]
            return [
                Pending(
                    address,
                    tables.records[address][0],
                    tuple(sorted((f, o) for s, f, o in self._vectors[address] if active and s == active[0])),
                )
                for address in waiting
            ]

    def fill(self, address: Address, text: str, collection: str, vectors: Sequence[Vector]) -> bool:
        """Write a record's next-space vectors if it still holds ``text``; False when it changed."""
        check_address(address)
        with self.store.locked() as tables:
            following = self._spaces.get(collection, {}).get(NEXT)
            if following is None:
                raise ConflictError(f"the {collection!r} collection is not being moved to a new space")
            checked = check_vectors(vectors, following[1])
            stored = tables.records.get(address)
            if stored is None or stored[0] != text:
                return False
            slots = self._vectors.setdefault(address, {})
            old = [slot for slot in slots if slot[0] == following[0]]
            size = sum(len(v.data) for v in checked) - sum(len(slots[slot]) for slot in old)
            self.store.charge(tables, quota_owner(address.scope, address.scope_id, None), size, 0, 0)
            for slot in old:
                del slots[slot]
            for vector in checked:
                slots[(following[0], vector.field, vector.ord)] = vector.data
            return True

    def switch(self, collection: str) -> int:
        """Make the next space active if nothing is pending (its old vectors deleted); the pending count."""
        with self.store.locked():
            found = self._spaces.get(collection, {})
            active, following = found.get(ACTIVE), found.get(NEXT)
            if active is None or following is None:
                raise ConflictError(f"the {collection!r} collection is not being moved to a new space")
            waiting = len(self._waiting(collection))
            if waiting:
                return waiting
            self._drop_space(active[0])
            found[ACTIVE] = following
            del found[NEXT]
            return 0

