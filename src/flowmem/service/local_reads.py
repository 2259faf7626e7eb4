"""An adapter's reads on its caller's event loop when the store is local, else in a worker thread (decision 0140).

A store with ``LocalCalls`` (SQLite, memory) answers a read without a network round
trip, and inside its ``deferred()`` a read that would wait for a lock raises
``WouldBlock`` before it did anything (decision 0027). ``local_read`` makes such a
read on the calling thread, as the HTTP app's short calls are made on its loop
(``flowmem.api.pool``), and in a worker thread (``asyncio.to_thread``) when it
would wait or when the store is a network one (PostgreSQL): a thread's hand-off
costs two wake-ups, which a loaded machine delays by milliseconds, more than a short
local read takes. Only for a call that changes nothing in the store: it may run
twice (on the loop, then in the thread).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from flowmem.store.base import LocalCalls
from flowmem.store.locks import WouldBlock

if TYPE_CHECKING:
    from flowmem.service import MemoryService

T = TypeVar("T")


async def local_read(memory: MemoryService, read: Callable[..., T], *args: Any) -> T:
    """``read(*args)`` on this thread when ``memory``'s store is local and it need not wait; else in a thread."""
    store = memory.store
    if isinstance(store, LocalCalls):
        try:
            with store.deferred():
                return read(*args)
        except WouldBlock:
            pass  # it changed nothing: run it again where it may wait
    return await asyncio.to_thread(read, *args)


__all__ = ["local_read"]
