"""``MemoryArchive``: the ``SupportsArchive`` capability of ``MemoryStore``.

A buffer's archived rows are kept as their JSON texts beside the buffer, with the
call ids they declared; the append's editor (``ArchivedListEditor``) answers
``was_evicted`` for those too (MEM-1, MEM-2).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from flowmem.core import CallIndex, Message, Repair, call_ids
from flowmem.core.compaction import prefix_digest
from flowmem.core.repairs import COMPACTION
from flowmem.store.archive import EVERY_ROW, Archived, SummaryMaker, SupportsArchive, WithArchive
from flowmem.store.base import Address, BodyPage
from flowmem.store.editor import SizedListEditor
from flowmem.store.engine import MemoryEngine
from flowmem.store.paging import PageAsk, check_version
from flowmem.store.rows import check_address, dump_json, utf8_size


class ArchivedListEditor(SizedListEditor):
    """``SizedListEditor`` for which an archived call id was evicted too (never forgotten)."""

    def __init__(
        self,
        rows: list[Message],
        size: int,
        evicted: Sequence[str] = (),
        archived: frozenset[str] = frozenset(),
        tokens: list[int] | None = None,
        index: CallIndex | None = None,
    ) -> None:
        super().__init__(rows, size, evicted, tokens, index)
        self.archived = archived

    def was_evicted(self, call_id: str) -> bool:
        """Whether an evicted or an archived turn declared ``call_id``."""
        return call_id in self.archived or super().was_evicted(call_id)


class MemoryArchive(SupportsArchive):
    """The archives of a ``MemoryStore``'s buffers, guarded by its locks."""

    def __init__(self, store: MemoryEngine) -> None:
        self.store = store
        self._rows: dict[Address, list[str]] = {}
        self._calls: dict[Address, frozenset[str]] = {}

    def editor(
        self,
        address: Address,
        rows: list[Message],
        size: int,
        evicted: Sequence[str],
        tokens: list[int] | None = None,
        index: CallIndex | None = None,
    ) -> ArchivedListEditor:
        """The append's editor of a buffer (the store lock held; ``tokens``: its rows' counts).

        ``index``: the call index of exactly these rows, when the store kept it.
        """
        archived = self._calls.get(address, frozenset())
        return ArchivedListEditor(rows, size, evicted, archived, tokens, index)

    def drop(self, address: Address) -> None:
        """Forget a buffer's archive (its buffer is deleted; the store lock held)."""
        self._rows.pop(address, None)
        self._calls.pop(address, None)

    def compact(
        self, address: Address, kept: int, digest: str, summary: SummaryMaker
    ) -> Archived | None:
        """Archive the rows before index ``kept`` if the rows up to it still have ``digest``."""
        check_address(address)
        store = self.store
        with store.locked_at(address) as tables:
            rows = tables.buffers.get(address, [])
            upto = len(rows) - 1 if kept == EVERY_ROW else kept
            if not 0 <= upto < len(rows) or upto == kept == 0:
                return None
            bodies = [(index, dump_json(rows[index], "message")) for index in range(upto + 1)]
            if prefix_digest(bodies) != digest:
                return None
            kept = len(rows) if kept == EVERY_ROW else kept
            archive = self._rows.get(address, [])
            first = len(archive) + 1
            made = summary(first, first + kept - 1)
            moved = [body for _, body in bodies[:kept]]
            size = tables.sizes.get(address, 0) + sum(utf8_size(dump_json(r, "message")) for r in made)
            logged = Repair(COMPACTION, (), kept, tuple(range(kept)), (first, first + kept - 1))
            log = store.stage_repairs(tables, address, [logged], size - tables.sizes.get(address, 0))
            store.set_buffer(tables, address, [*made, *rows[kept:]], size)  # the quota may refuse it
            log()  # the repair log's entry (issue 37 §2), in the same locked step
            self._rows[address] = [*archive, *moved]
            ids = {cid for body in moved for cid in call_ids(json.loads(body))}
            self._calls[address] = self._calls.get(address, frozenset()) | ids
            return Archived(kept, first, first + kept - 1, sum(map(utf8_size, moved)), made)

    def read(self, address: Address) -> WithArchive:
        """Return the archived rows' and the live rows' texts, in order (one snapshot)."""
        check_address(address)
        with self.store.locked() as tables:
            live = tables.buffers.get(address, [])
            archived = list(self._rows.get(address, []))
            return WithArchive(archived, [dump_json(row, "message") for row in live])

    def _page(self, address: Address, ask: PageAsk) -> BodyPage:
        """One page of the archived rows (``SupportsArchive.page``); numbered from 1, as SQL's."""
        after, rows, chars = ask.after, ask.rows, ask.chars
        with self.store.locked() as tables:
            live = tables.buffers.get(address)
            found = None if live is None else (0, tables.versions.get(address, 0))
            check_version(address, found, ask.version)
            if live is None or found is None:
                return BodyPage(None, 0)
            archived = self._rows.get(address, [])
            index = 0 if after is None else min(after, len(archived))
            bodies: list[tuple[int, str]] = []
            size = 0
            while index < len(archived) and len(bodies) < rows and size < chars:
                bodies.append((index + 1, archived[index]))
                size += len(archived[index])
                index += 1
            return BodyPage(found, len(live), bodies, False, index < len(archived))
