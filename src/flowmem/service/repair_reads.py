"""The memory service's side of a buffer's repair log (issue 37 §2), joined to ``MemoryService`` as a base.

The log is read under the buffer's own access rules: the scope resolves as a read of
the buffer does (``_resolve("load", …)``: viewing a session is enough; a refusal
returns no entries, MEM-7), and a family's first line reads its head line, as the
buffer's read does (``read_key``).

Two changes that write no row are noted in it (decision 0121), each in a small write
of its own, never failing the request that made it: ``note_dropped``, the entries a
whole stored read's normalization dropped (MEM-5; asked by a caller who may read the
buffer, since the memory reports what it did, not what the caller wrote), and
``note_refused``, a write refused whole that named an existing buffer (``buffer_full``).
Neither is written for a refused scope (it reaches no storage, MEM-7), for a buffer
that does not exist, or when the buffer's newest entry says the same already.
"""

from __future__ import annotations

import logging

from flowmem.core import Repair
from flowmem.errors import ConfigurationError, StoreError
from flowmem.results import RepairLogResult
from flowmem.scope import ExecutionContext, Refusal, check_scope
from flowmem.service.checks import check_key, check_scope_id
from flowmem.service.conversation import read_key
from flowmem.service.part import ServicePart
from flowmem.store.base import Address, Store
from flowmem.store.repairs import PAGE, SupportsRepairs, check_paging

log = logging.getLogger(__name__)


def note_repair(store: Store, address: Address, repair: Repair) -> bool:
    """Note ``repair`` in the log of the buffer at ``address`` (``SupportsRepairs.note``); False: not noted.

    A store without a log, or one that could not write the note (busy, unreachable:
    logged as a WARNING), notes nothing: the request that made the note is answered
    as it would have been without it.
    """
    found = getattr(store, "repairs", None)
    if not isinstance(found, SupportsRepairs):
        return False
    try:
        return found.note(address, repair)
    except StoreError as exc:
        log.warning("the repair log of %s/%s/%s was not noted: %s", *address, exc)
        return False


class RepairReads(ServicePart):
    """``MemoryService``'s read of the repair log; the service gives it its store and scope resolution."""

    def repairs(
        self,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        *,
        before: int | None = None,
        limit: int = PAGE,
    ) -> RepairLogResult:
        """A page of the buffer's repair log, newest first (entries numbered below ``before``).

        InvalidInputError for a negative ``before`` or a ``limit`` outside 0..1000.
        """
        name = check_key(key)
        check_paging(before, limit)
        resolved = self._resolve("load", scope, name, context)
        if isinstance(resolved, Refusal):
            return RepairLogResult(refusal=resolved)
        return self.repairs_raw(scope, resolved, name, before=before, limit=limit)

    def note_dropped(self, scope: str, key: str, context: ExecutionContext | None, dropped: int) -> bool:
        """Note that a whole read of the buffer dropped ``dropped`` entries normalizing it (MEM-5).

        Resolved as the buffer's read (viewing is enough); True when the log took it.
        """
        name = check_key(key)
        resolved = self._resolve("load", scope, name, context)
        if isinstance(resolved, Refusal) or dropped <= 0:
            return False
        address = Address(check_scope(scope), resolved, read_key(self.store, scope, resolved, name))
        return note_repair(self.store, address, Repair("MEM-5", (), dropped))

    def repairs_raw(
        self, scope: str, scope_id: str, key: str, *, before: int | None = None, limit: int = PAGE
    ) -> RepairLogResult:
        """A page of the repair log at an explicit scope id (trusted callers: the CLI; no resolution)."""
        check_paging(before, limit)
        log = getattr(self.store, "repairs", None)
        if not isinstance(log, SupportsRepairs):
            raise ConfigurationError("this store keeps no repair log")
        name = read_key(self.store, scope, check_scope_id(scope_id), check_key(key))
        page = log.page(Address(check_scope(scope), scope_id, name), before=before, limit=limit)
        entries = [entry.to_dict() for entry in page.entries]
        after = page.entries[-1].seq if page.more and page.entries else None
        return RepairLogResult(entries, after, scope_id)


__all__ = ["RepairReads", "note_repair"]
