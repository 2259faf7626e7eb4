"""Adapters that put flowmem under other frameworks' memory interfaces.

Each adapter lives in its own module and needs its extra:
``flowmem.integrations.langchain`` (the ``langchain`` extra) and
``flowmem.integrations.openai_agents`` (the ``openai-agents`` extra).
This package imports neither, so importing it never needs an extra.

Both adapters take any ``flowmem.memory.Memory``: a ``MemoryService`` in process or
a ``flowmem.client.Client`` over HTTP. The OpenAI Agents session, async like its
SDK, also takes an ``flowmem.memory.AsyncMemory`` (a ``flowmem.client.AsyncClient``)
and awaits it; the LangChain history is synchronous and refuses one (decision 0036).
They never import ``flowmem.client``.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from typing import TYPE_CHECKING, Any, cast

from flowmem.memory import OPERATIONS, AsyncMemory, Memory
from flowmem.results import BufferResult, PopResult, ReadResult, WriteResult
from flowmem.scope import ExecutionContext


def require(module: str, extra: str) -> None:
    """Import ``module`` or raise an ``ImportError`` that names the extra to install."""
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(
            f"this flowmem adapter needs {module!r}: install flowmem's {extra!r} extra, "
            f"pip install '<checkout>[{extra}]' (docs/guide.md, Install)"
        ) from exc


def is_async_memory(memory: object, adapter: str) -> bool:
    """Return True when ``memory``'s operations are awaited (an ``AsyncMemory``), False when not.

    An object with some operations awaited and others not is neither protocol:
    TypeError, said at construction rather than at the first call.
    """
    awaited = [op for op in OPERATIONS if inspect.iscoroutinefunction(getattr(memory, op, None))]
    if awaited and len(awaited) < len(OPERATIONS):
        plain = [op for op in OPERATIONS if op not in awaited]
        raise TypeError(
            f"{adapter} needs a flowmem.memory.Memory or AsyncMemory; {type(memory).__name__} "
            f"awaits {', '.join(awaited)} but not {', '.join(plain)}"
        )
    return bool(awaited)


def memory_of(memory: Memory, adapter: str) -> Memory:
    """Return ``memory`` when its operations are synchronous; raise TypeError otherwise.

    An ``AsyncClient`` (an ``AsyncMemory``) has the protocol's methods, awaited: given
    to a synchronous adapter, its calls would return coroutines that are never run.
    Say so at construction.
    """
    if is_async_memory(memory, adapter):
        raise TypeError(
            f"{adapter} is synchronous and needs a synchronous flowmem.memory.Memory "
            f"(a MemoryService or a flowmem.client.Client), not {type(memory).__name__}, "
            "whose calls are awaited (an AsyncMemory)"
        )
    return memory


def async_memory_of(memory: Memory | AsyncMemory, adapter: str) -> AsyncMemory:
    """Return ``memory``'s operations as awaitables: itself for an ``AsyncMemory``, else ``InThread``.

    The one place an async adapter decides, once at construction, how its calls run:
    awaited on the caller's loop, or each in a worker thread.
    """
    if is_async_memory(memory, adapter):
        return cast("AsyncMemory", memory)
    return InThread(cast("Memory", memory))


class InThread:
    """An ``AsyncMemory`` over a synchronous ``Memory``: each call runs in a worker thread.

    ``asyncio.to_thread`` keeps the event loop free while the call (a store write,
    an HTTP request) is in flight.
    """

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    async def read(
        self, scope: str, key: str, context: ExecutionContext | None, default: Any = None
    ) -> ReadResult:
        """``Memory.read`` in a worker thread."""
        return await asyncio.to_thread(self.memory.read, scope, key, context, default)

    async def write(
        self,
        scope: str,
        key: str,
        value: Any,
        context: ExecutionContext | None,
        ttl: float | None = None,
    ) -> WriteResult:
        """``Memory.write`` in a worker thread."""
        return await asyncio.to_thread(self.memory.write, scope, key, value, context, ttl)

    async def delete(self, scope: str, key: str, context: ExecutionContext | None) -> WriteResult:
        """``Memory.delete`` in a worker thread."""
        return await asyncio.to_thread(self.memory.delete, scope, key, context)

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
        """``Memory.append`` in a worker thread."""
        return await asyncio.to_thread(
            self.memory.append,
            scope,
            key,
            messages,
            context,
            max_messages,
            return_messages=return_messages,
        )

    async def load(
        self,
        scope: str,
        key: str,
        context: ExecutionContext | None,
        last: int | None = None,
        *,
        max_tokens: int | None = None,
    ) -> BufferResult:
        """``Memory.load`` in a worker thread."""
        return await asyncio.to_thread(
            self.memory.load, scope, key, context, last, max_tokens=max_tokens
        )

    async def clear(self, scope: str, key: str, context: ExecutionContext | None) -> WriteResult:
        """``Memory.clear`` in a worker thread."""
        return await asyncio.to_thread(self.memory.clear, scope, key, context)

    async def pop_last(self, scope: str, key: str, context: ExecutionContext | None) -> PopResult:
        """``Memory.pop_last`` in a worker thread."""
        return await asyncio.to_thread(self.memory.pop_last, scope, key, context)


if TYPE_CHECKING:  # mypy checks that InThread has every operation of AsyncMemory
    _in_thread_is_async_memory: type[AsyncMemory] = InThread
