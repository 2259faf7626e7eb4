"""The memory service's read of a buffer's repair log (issue 37 §2), joined to ``MemoryService`` as a base.

The log is read under the buffer's own access rules: the scope resolves as a read of
the buffer does (``_resolve("load", …)``: viewing a session is enough; a refusal
returns no entries, MEM-7), and a family's first line reads its head line, as the
buffer's read does (``read_key``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowmem.errors import ConfigurationError
from flowmem.results import RepairLogResult
from flowmem.scope import ExecutionContext, Refusal, check_scope
from flowmem.service.checks import check_key, check_scope_id
from flowmem.service.conversation import read_key
from flowmem.store.base import Address, Store
from flowmem.store.repairs import PAGE, SupportsRepairs, check_paging


class RepairReads:
    """``MemoryService``'s read of the repair log; the service gives it its store and scope resolution."""

    store: Store

    if TYPE_CHECKING:

        def _resolve(
            self, operation: str, scope: object, key: str, context: ExecutionContext | None
        ) -> str | Refusal: ...

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


__all__ = ["RepairReads"]
