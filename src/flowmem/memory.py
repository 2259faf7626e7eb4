"""``Memory``: the memory operations the adapters, the nodes and the runtime need.

One interface, local or remote: ``flowmem.service.MemoryService`` implements it in
process over a store, ``flowmem.client.Client`` over HTTP against ``flowmem serve``.
``AsyncMemory`` is its awaited twin (the same operations, parameters and results,
``async def``): ``flowmem.client.AsyncClient`` implements it (decision 0036).
Every operation takes the scope, the key and the execution context exactly as
``MemoryService`` does, resolves the scope the same way (a refusal is the neutral
result, MEM-7) and returns the same result types (``flowmem.results``).
No I/O and no server dependency here.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from flowmem.results import BufferResult, PopResult, ReadResult, WriteResult
from flowmem.scope import ExecutionContext

OPERATIONS = ("read", "write", "delete", "append", "load", "clear", "pop_last")
"""The operations of ``Memory`` and ``AsyncMemory``, by name."""


@runtime_checkable
class Memory(Protocol):
    """Memory records and conversation buffers under resolved scopes."""

    def read(
        self, scope: str, key: str, context: ExecutionContext | None, default: Any = None
    ) -> ReadResult:
        """Read a memory record; ``default`` and ``found=False`` when absent or refused."""
        ...

    def write(
        self,
        scope: str,
        key: str,
        value: Any,
        context: ExecutionContext | None,
        ttl: float | None = None,
    ) -> WriteResult:
        """Write a JSON value with an optional TTL in seconds; ``success=False`` when refused."""
        ...

    def delete(self, scope: str, key: str, context: ExecutionContext | None) -> WriteResult:
        """Delete a memory record; ``removed`` is 1 when one existed."""
        ...

    def append(
        self,
        scope: str,
        key: str,
        messages: object,
        context: ExecutionContext | None,
        max_messages: int = 0,
        *,
        return_messages: bool = False,
    ) -> BufferResult:
        """Append messages to a buffer under the GR-MEM rules (MEM-1, 2, 3, 10, 12, 14)."""
        ...

    def load(
        self,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        last: int | None = None,
        *,
        max_tokens: int | None = None,
    ) -> BufferResult:
        """Return a buffer's rows (its last ``last`` when given); ``count`` is the whole buffer's.

        ``max_tokens``: the longest sendable suffix within that many tokens (``window``).
        """
        ...

    def clear(self, scope: str, key: str, context: ExecutionContext | None) -> WriteResult:
        """Delete every row of a buffer; ``removed`` is how many there were."""
        ...

    def pop_last(self, scope: str, key: str, context: ExecutionContext | None) -> PopResult:
        """Remove and return a buffer's last row (None when empty or refused)."""
        ...


@runtime_checkable
class AsyncMemory(Protocol):
    """``Memory``'s operations, awaited: the same parameters, results and refusals."""

    async def read(
        self, scope: str, key: str, context: ExecutionContext | None, default: Any = None
    ) -> ReadResult:
        """Read a memory record; ``default`` and ``found=False`` when absent or refused."""
        ...

    async def write(
        self,
        scope: str,
        key: str,
        value: Any,
        context: ExecutionContext | None,
        ttl: float | None = None,
    ) -> WriteResult:
        """Write a JSON value with an optional TTL in seconds; ``success=False`` when refused."""
        ...

    async def delete(self, scope: str, key: str, context: ExecutionContext | None) -> WriteResult:
        """Delete a memory record; ``removed`` is 1 when one existed."""
        ...

    async def append(
        self,
        scope: str,
        key: str,
        messages: object,
        context: ExecutionContext | None,
        max_messages: int = 0,
        *,
        return_messages: bool = False,
    ) -> BufferResult:
        """Append messages to a buffer under the GR-MEM rules (MEM-1, 2, 3, 10, 12, 14)."""
        ...

    async def load(
        self,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        last: int | None = None,
        *,
        max_tokens: int | None = None,
    ) -> BufferResult:
        """Return a buffer's rows (its last ``last`` when given); ``count`` is the whole buffer's.

        ``max_tokens``: the longest sendable suffix within that many tokens (``window``).
        """
        ...

    async def clear(self, scope: str, key: str, context: ExecutionContext | None) -> WriteResult:
        """Delete every row of a buffer; ``removed`` is how many there were."""
        ...

    async def pop_last(self, scope: str, key: str, context: ExecutionContext | None) -> PopResult:
        """Remove and return a buffer's last row (None when empty or refused)."""
        ...


__all__ = ["OPERATIONS", "AsyncMemory", "Memory"]
