"""What a part of ``MemoryService`` uses of the service: its store and its scope resolution.

``MemoryService`` is joined from base classes, one job each (``BufferReads``,
``CompactionCalls``, ``RepairReads``); each is a ``ServicePart``, so what they need of
the service they are joined to is declared once, here, and mypy checks that the
service gives it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowmem.scope import ExecutionContext, Refusal
from flowmem.store.base import Store


class ServicePart:
    """A base class of ``MemoryService``: the store it reads and writes, and its scope resolution."""

    store: Store

    if TYPE_CHECKING:

        def _resolve(
            self, operation: str, scope: object, key: str, context: ExecutionContext | None
        ) -> str | Refusal: ...
