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

import importlib
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, cast

from flowmem.integrations.in_order import InOrder
from flowmem.memory import OPERATIONS, AsyncMemory, Memory


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
    return cast("AsyncMemory", InThread(cast("Memory", memory)))


class InThread:
    """An ``AsyncMemory`` over a synchronous ``Memory``: each call runs in a worker thread.

    A worker thread keeps the event loop free while the call (a store write, an HTTP
    request) is in flight. The calls run one at a time in the order made
    (``InOrder``, decision 0152): a call whose caller was cancelled while it ran ends
    before the next one starts. Its operations are not written out: each is made
    from ``AsyncMemory``'s own (``_in_thread``, one per name of ``OPERATIONS``), so
    a new operation of the protocol is one here too (decision 0060).
    """

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        # the queue of this memory's calls; a call outside ``OPERATIONS`` (a session's
        # ``compact_to``) takes its turn in it too: ``await in_thread.calls.run(f, ...)``
        self.calls = InOrder()


WRITES = frozenset({"write", "delete", "append", "clear", "pop_last"})
"""The operations that change what is stored: one that fails after its caller left is logged (decision 0156)."""


def _writing(name: str, args: tuple[Any, ...]) -> str:
    """What a write carries, for the log when it fails with no caller left: its scope, key and messages."""
    where = " ".join(repr(arg) for arg in args[:2])
    messages = args[2] if name == "append" and len(args) > 2 else None
    carried = f", {len(messages)} message(s)" if isinstance(messages, list | tuple) else ""
    return f"flowmem {name} of {where}{carried} (an async adapter's call in a worker thread)"


def _in_thread(name: str) -> Callable[..., Awaitable[Any]]:
    """``Memory.<name>`` in a worker thread, with ``AsyncMemory.<name>``'s signature."""

    async def operation(self: InThread, *args: Any, **kwargs: Any) -> Any:
        if name in WRITES:
            return await self.calls.write(_writing(name, args), getattr(self.memory, name), *args, **kwargs)
        return await self.calls.run(getattr(self.memory, name), *args, **kwargs)

    operation.__name__ = name
    operation.__qualname__ = f"{InThread.__name__}.{name}"
    operation.__doc__ = f"``Memory.{name}`` in a worker thread."
    operation.__signature__ = inspect.signature(getattr(AsyncMemory, name))  # type: ignore[attr-defined]
    return operation


for _name in OPERATIONS:
    setattr(InThread, _name, _in_thread(_name))
